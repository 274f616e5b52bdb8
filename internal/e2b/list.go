package e2b

import (
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Listing sandboxes: E2B's v1 (running ones) and v2 (states, filters, pages).

// matchMetadata reads E2B's metadata filter: a query string of key=value.
func matchMetadata(q string) (map[string]string, error) {
	if q == "" {
		return nil, nil
	}
	vals, err := url.ParseQuery(q)
	if err != nil {
		return nil, statusErr(http.StatusBadRequest, "metadata %q: %v", truncate(q), err)
	}
	out := map[string]string{}
	for k, vs := range vals {
		out[k] = vs[0]
	}
	return out, nil
}

func hasMetadata(rec record, want map[string]string) bool {
	for k, v := range want {
		if rec.Metadata[k] != v {
			return false
		}
	}
	return true
}

func (s *Server) listV1(w http.ResponseWriter, r *http.Request) error {
	md, err := matchMetadata(r.URL.Query().Get("metadata"))
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, rec := range s.owned(r) {
		if hasMetadata(rec, md) && s.state(rec) == "running" {
			out = append(out, s.listedJSON(rec, false))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listV2(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "metadata", "state", "order", "startedAfter", "template", "nextToken", "limit":
		default:
			return statusErr(http.StatusBadRequest, "unknown query parameter %q", truncate(k))
		}
	}
	md, err := matchMetadata(q.Get("metadata"))
	if err != nil {
		return err
	}
	states := map[string]bool{"running": true, "paused": true}
	if v := q.Get("state"); v != "" {
		states = map[string]bool{}
		for _, st := range strings.Split(v, ",") {
			if st != "running" && st != "paused" {
				return statusErr(http.StatusBadRequest, "state %q: want running or paused", truncate(st))
			}
			states[st] = true
		}
	}
	var after time.Time
	if v := q.Get("startedAfter"); v != "" {
		if after, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return statusErr(http.StatusBadRequest, "startedAfter %q: want RFC 3339", truncate(v))
		}
	}
	limit, err := pageLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		return statusErr(http.StatusBadRequest, "order %q: want asc or desc", truncate(order))
	}
	recs := s.owned(r)
	if order == "desc" {
		for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
			recs[i], recs[j] = recs[j], recs[i]
		}
	}
	from, err := pageFrom(q.Get("nextToken"))
	if err != nil {
		return err
	}
	var out []map[string]any
	next := ""
	for i, rec := range recs {
		if i < from {
			continue
		}
		if !hasMetadata(rec, md) || !states[s.state(rec)] || (q.Get("template") != "" && q.Get("template") != rec.TemplateID) || rec.StartedAt.Before(after) {
			continue
		}
		if len(out) == limit {
			next = pageToken(i)
			break
		}
		out = append(out, s.listedJSON(rec, false))
	}
	if out == nil {
		out = []map[string]any{}
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pageLimit is a list's limit query parameter (default 100).
func pageLimit(v string) (int, error) {
	if v == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, statusErr(http.StatusBadRequest, "limit %q: want 1 to 1000", truncate(v))
	}
	return n, nil
}

// pageToken is the nextToken (X-Next-Token) of a page starting at item i;
// pageFrom reads it back (empty: the first page).
func pageToken(i int) string { return hex.EncodeToString([]byte(strconv.Itoa(i))) }

func pageFrom(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	raw, err := hex.DecodeString(v)
	n, err2 := strconv.Atoi(string(raw))
	if err != nil || err2 != nil || n < 0 {
		return 0, statusErr(http.StatusBadRequest, "nextToken %q is not one this server gave", truncate(v))
	}
	return n, nil
}
