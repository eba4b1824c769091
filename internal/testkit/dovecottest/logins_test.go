package dovecottest

import (
	"reflect"
	"strings"
	"testing"
)

const sampleLog = `Nov 23 09:10:58 imap-login: Info: Disconnected: Connection closed (no auth attempts in 0 secs): user=<>, rip=127.0.0.1, lip=127.0.0.1, TLS handshaking: Connection closed, session=<owjX+O1g7r5/AAAB>
Nov 23 09:10:58 imap-login: Info: Login: user=<test>, method=PLAIN, rip=127.0.0.1, lip=127.0.0.1, mpid=31595, TLS, session=<3CDX+O1g9r5/AAAB>
Nov 23 09:10:58 imap-login: Info: Disconnected: Connection closed (auth failed, 1 attempts in 0 secs): user=<test>, rip=127.0.0.2, lip=127.0.0.1, session=<PwbY+O1gWah/AAAC>
Nov 23 09:10:59 imap-login: Info: Login: user=<test>, method=PLAIN, rip=127.0.0.1, lip=127.0.0.1, mpid=31601, secured, session=<B1HX+O1gAr9/AAAB>
Nov 23 09:11:00 imap-login: Info: Login: user=<a@example.org>, method=PLAIN, rip=127.0.0.2, lip=127.0.0.1, mpid=31602, TLS, session=<xnrX+O1gEr9/AAAB>
`

func TestParseLogins(t *testing.T) {
	tests := []struct {
		name, log string
		want      []Login
	}{
		{"empty", "", nil},
		{"sample", sampleLog, []Login{
			{User: "test", Remote: "127.0.0.1", TLS: true},
			{User: "test", Remote: "127.0.0.1"},
			{User: "a@example.org", Remote: "127.0.0.2", TLS: true},
		}},
		{"no final newline", "imap-login: Info: Login: user=<u>, rip=::1, TLS", []Login{{User: "u", Remote: "::1", TLS: true}}},
		{"TLS handshaking is not TLS", "imap-login: Info: Login: user=<u>, rip=::1, TLS handshaking", []Login{{User: "u", Remote: "::1"}}},
	}
	for _, tt := range tests {
		if got := parseLogins(tt.log); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: parseLogins = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// FuzzParseLogins: any log gives one Login per "Login: " line, none with
// a user or address spanning lines.
func FuzzParseLogins(f *testing.F) {
	f.Add(sampleLog)
	f.Fuzz(func(t *testing.T, log string) {
		logins := parseLogins(log)
		if want := strings.Count(log, "imap-login: Info: Login: "); len(logins) > want {
			t.Fatalf("parseLogins found %d logins in %d login lines", len(logins), want)
		}
		for _, l := range logins {
			if strings.ContainsAny(l.User+l.Remote, "\n") {
				t.Fatalf("login %+v spans lines", l)
			}
		}
	})
}
