package catalog

// Posters: who writes to a list, month by month, kept as messages come,
// leave and move (the triggers below), so that a list's page reads a
// year's top posters from a few rows a poster and month, not from every
// message of the year.

import (
	"context"
	"time"
)

var postersSchema = `
-- How many messages each sender wrote to a list in a month: posterKey
-- of the sender, the name it last gave.
CREATE TABLE posters (
	list     TEXT    NOT NULL,
	month    INTEGER NOT NULL,  -- year*100 + month, as months
	addr     TEXT    NOT NULL,  -- posterKey
	name     TEXT    NOT NULL,
	messages INTEGER NOT NULL,
	PRIMARY KEY (list, month, addr)
) WITHOUT ROWID;

CREATE TRIGGER posters_removed AFTER DELETE ON messages BEGIN` + posterLeaves + `END;

CREATE TRIGGER posters_moved AFTER UPDATE OF list ON messages WHEN NEW.list IS NOT OLD.list BEGIN` + posterLeaves + `
	INSERT INTO posters (list, month, addr, name, messages)
		VALUES (NEW.list, ` + sqlMonth("NEW") + `, ` + sqlPosterKey("NEW") + `, NEW.from_name, 1)
		ON CONFLICT (list, month, addr) DO UPDATE SET messages = messages + 1;
END;
`

// posterLeaves takes the OLD row's message out of its sender's count.
var posterLeaves = `
	UPDATE posters SET messages = messages - 1 WHERE list = OLD.list AND month = ` + sqlMonth("OLD") + ` AND addr = ` + sqlPosterKey("OLD") + `;
	DELETE FROM posters WHERE list = OLD.list AND month = ` + sqlMonth("OLD") + ` AND addr = ` + sqlPosterKey("OLD") + ` AND messages <= 0;
`

// sqlMonth is monthOf in SQL, of a row's date.
func sqlMonth(row string) string {
	return "CAST(strftime('%Y%m', " + row + ".date, 'unixepoch') AS INTEGER)"
}

// sqlPosterKey is posterKey in SQL, of a row (lower is ASCII-only in
// SQLite, as lowerASCII).
func sqlPosterKey(row string) string {
	return "CASE WHEN " + row + ".from_addr != '' THEN lower(" + row + ".from_addr) ELSE 'name:' || " + row + ".from_name END"
}

// posterKey is what tells senders apart: the address, lower-case (ASCII);
// the name for mail without one.
func posterKey(addr, name string) string {
	if addr != "" {
		return lowerASCII(addr)
	}
	return "name:" + name
}

// Poster is a sender to a list and how many messages they wrote.
type Poster struct {
	Name     string `json:"name"`
	Address  string `json:"address,omitempty"`
	Messages int    `json:"messages"`
}

// maxPosters bounds Posters' limit.
const maxPosters = 100

// Posters returns the senders who wrote most to list from the month of
// since on, most first (at most limit, at most maxPosters), and how many
// senders wrote in all then.
func (c *Catalog) Posters(ctx context.Context, list string, since time.Time, limit int) ([]Poster, int, error) {
	from := monthOf(since.Unix())
	var people int
	if err := c.queryRow(ctx, `SELECT count(DISTINCT addr) FROM posters WHERE list = ? AND month >= ?`, list, from).Scan(&people); err != nil {
		return nil, 0, c.readErr("the posters of "+list, err)
	}
	rows, err := c.query(ctx, `SELECT addr, max(name), sum(messages) AS n FROM posters WHERE list = ? AND month >= ?
		GROUP BY addr ORDER BY n DESC, addr LIMIT ?`, list, from, min(max(limit, 0), maxPosters))
	if err != nil {
		return nil, 0, c.readErr("the posters of "+list, err)
	}
	defer rows.Close()
	var out []Poster
	for rows.Next() {
		var p Poster
		var key string
		if err := rows.Scan(&key, &p.Name, &p.Messages); err != nil {
			return nil, 0, c.readErr("the posters of "+list, err)
		}
		if len(key) > 5 && key[:5] == "name:" {
			p.Name = key[5:]
		} else {
			p.Address = key
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, c.readErr("the posters of "+list, err)
	}
	return out, people, nil
}
