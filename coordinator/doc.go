// Package coordinator serves a run authority over HTTP, for processes on
// other machines than the authority's runs.db, and is their client.
//
// # Endpoints
//
// Every /v1/ request needs the header "Authorization: Bearer TOKEN"
// (RFC 6750); a missing or wrong token gets 401. Errors have the JSON body
// {"error":"...","kind":"..."}.
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
// A wrong method gets 405. The metrics are
// chibrary_coordinator_leases_issued_total,
// chibrary_coordinator_errors_total{kind},
// chibrary_coordinator_requests_total{route,code} and
// chibrary_coordinator_request_duration_seconds{route}, in a registry
// of the server's own, with the Go and process collectors.
//
// # Backup
//
// bbolt locks runs.db for as long as the coordinator has it open, so a
// second process cannot read the file then. A backup is therefore taken
// through the coordinator while it runs (GET /v1/backup, which
// `coordinator backup --coordinator URL --token-file F OUT` calls), and
// from the file when it is stopped (`coordinator backup --db runs.db OUT`).
// Both copy inside one read transaction, so the copy is consistent while
// runs go on being issued, and both check that the copy opens as the same
// authority before renaming it into place.
//
// # Restore
//
//  1. Stop the coordinator (SIGTERM; it finishes requests in flight and
//     closes the database).
//  2. Copy the backup over runs.db (keep the damaged file aside).
//  3. Bump the next run past every run issued since the backup was taken:
//     `coordinator bump --db runs.db --to N`, where N is above the highest
//     run any store has recorded (resolver inspect shows a store's leases;
//     when unsure, a generous N costs nothing: there are 2^30 runs).
//  4. Start the coordinator.
//
// Step 3 matters: a restored copy's next run is the one it had when the
// backup was taken, so without it the runs issued after the backup would
// be issued again, to other processes. The store refuses a second lease of
// a run it has seen (it keeps every run's nonce), so no message is
// overwritten, but the imports holding those runs fail until the bump.
//
// # Client
//
// [Client] implements callnumber.RunSource over this API, with retries:
// see its documentation for why a retried request may waste a run but
// never duplicate one.
package coordinator
