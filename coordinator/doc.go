// Package coordinator serves a run authority over HTTP, for processes on
// other machines than the authority's runs.db, and is their client.
//
// Every /v1/ request needs "Authorization: Bearer TOKEN" (RFC 6750), or gets
// 401. Errors have the JSON body {"error":"...","kind":"..."}.
//
//	POST /v1/runs        {"program":"importer","host":"h1","pid":123,"note":"..."}
//	                     -> 201 {"run":N,"version":0,"authority":"HEX","scheme":"mix",
//	                             "key":"HEX","nonce":"HEX","issued_at":"RFC3339", ...holder}
//	                     400 malformed body or unknown field, 413 body over 64 KiB,
//	                     409 (kind "exhausted") when the run space is used up
//	GET  /v1/runs/{run}  -> 200 the lease record; 404 never issued; 400 not a run
//	GET  /v1/backup      -> 200 a consistent copy of runs.db (application/octet-stream,
//	                        header Chibrary-Authority: the authority ID)
//	GET  /healthz        -> 200 when the database is usable, else 503 (no token)
//	GET  /api/v1/version -> the build: {"program","version","revision",...} (no token)
//	GET  /metrics        -> Prometheus metrics (no token)
//
// bbolt locks runs.db while the coordinator has it open, so a backup is
// taken through the coordinator while it runs, and from the file when it is
// stopped. A restored backup must be bumped past every run issued since
// (docs/operating.md), or those runs would be issued again.
package coordinator
