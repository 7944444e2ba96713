package sqldb

import "strings"

// redactedKeys are the query parameters of a DSN that hold secrets.
var redactedKeys = []string{"password", "sslpassword", "passfile", "sslkey"}

// Redact keeps a DSN's secrets out of messages: the password of its user information and the values
// of its query parameters (or key=value words) that name one.
func Redact(dsn string) string {
	out := dsn
	if scheme := strings.Index(out, "://"); scheme > 0 {
		rest := out[scheme+3:]
		end := strings.IndexAny(rest, "?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			user := rest[:at]
			if colon := strings.Index(user, ":"); colon >= 0 {
				user = user[:colon] + ":…"
			}
			out = out[:scheme+3] + user + rest[at:]
		}
	}
	lower := strings.ToLower(out)
	var b strings.Builder
	for i := 0; i < len(out); {
		hit := ""
		if i == 0 || strings.ContainsRune("?&; \t", rune(out[i-1])) {
			for _, k := range redactedKeys {
				if strings.HasPrefix(lower[i:], k+"=") {
					hit = k
					break
				}
			}
		}
		if hit == "" {
			b.WriteByte(out[i])
			i++
			continue
		}
		b.WriteString(out[i : i+len(hit)+1])
		b.WriteString("…")
		i += len(hit) + 1
		if i < len(out) && out[i] == '\'' {
			// A quoted value (key=value words) ends at its closing quote.
			if end := strings.IndexByte(out[i+1:], '\''); end >= 0 {
				i += end + 2
			} else {
				i = len(out)
			}
			continue
		}
		for i < len(out) && !strings.ContainsRune("&; \t#", rune(out[i])) {
			i++
		}
	}
	return b.String()
}
