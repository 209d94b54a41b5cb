package tools

// Tool retrieval: which of many tools fit what is being talked about.
//
// A guide with more tools than its tools_max (an MCP server easily brings
// fifty) offers each request a few of them: the pinned ones, those in use,
// and the best matches for the conversation by Okapi BM25 over each tool's
// name, description and parameter names. The index lives in memory beside
// the tool set it describes, built on first use and never changed: the set
// is replaced as a whole when an MCP server's tools change, and the index
// with it. A few hundred short documents take well under a millisecond to
// index and microseconds to search, so SQLite's FTS5 (which ranks stored
// messages) would add a table to keep in step with a set that lives only
// in this process, for nothing.

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// BM25's usual constants: how fast a word's weight saturates as it
// repeats, and how much a long description is discounted.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Weights of a tool's parts: its name says most about what it does.
const (
	nameWeight  = 3
	otherWeight = 1
)

// maxQueryTerms bounds the work one search does, however long the text it
// is given (a pasted document).
const maxQueryTerms = 512

// toolIndex ranks the tools of one toolSet.
type toolIndex struct {
	names []string
	tf    []map[string]float64 // per tool: weighted count of each term
	lens  []float64            // per tool: weighted number of terms
	avg   float64
	idf   map[string]float64
}

func newToolIndex(set *toolSet) *toolIndex {
	ix := &toolIndex{names: set.names, idf: map[string]float64{}}
	df := map[string]int{}
	var total float64
	for _, name := range set.names {
		t := set.tools[name]
		tf := map[string]float64{}
		for _, w := range terms(name) {
			tf[w] += nameWeight
		}
		for _, w := range terms(t.Description + " " + strings.Join(paramNames(t.Parameters), " ")) {
			tf[w] += otherWeight
		}
		var n float64
		for w, c := range tf {
			df[w]++
			n += c
		}
		ix.tf = append(ix.tf, tf)
		ix.lens = append(ix.lens, n)
		total += n
	}
	if len(set.names) > 0 {
		ix.avg = total / float64(len(set.names))
	}
	n := float64(len(set.names))
	for w, d := range df {
		ix.idf[w] = math.Log(1 + (n-float64(d)+0.5)/(float64(d)+0.5))
	}
	return ix
}

// search returns up to n names of tools among those want accepts, best
// match for query first; a tool that shares no word with it is not a
// match. Equal scores keep the names' order, so the same question gets
// the same tools.
func (ix *toolIndex) search(query string, n int, want func(name string) bool) []string {
	q := terms(query)
	slices.Sort(q)
	q = slices.Compact(q)
	if len(q) > maxQueryTerms {
		q = q[:maxQueryTerms]
	}
	type hit struct {
		i     int
		score float64
	}
	var hits []hit
	for i, name := range ix.names {
		if want != nil && !want(name) {
			continue
		}
		var score float64
		norm := bm25K1 * (1 - bm25B + bm25B*ix.lens[i]/max(ix.avg, 1))
		for _, w := range q {
			if f := ix.tf[i][w]; f > 0 {
				score += ix.idf[w] * f * (bm25K1 + 1) / (f + norm)
			}
		}
		if score > 0 {
			hits = append(hits, hit{i, score})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return cmp.Compare(b.score, a.score) })
	out := make([]string, 0, min(n, len(hits)))
	for _, h := range hits[:min(n, len(hits))] {
		out = append(out, ix.names[h.i])
	}
	return out
}

// Search returns up to n names of the registry's tools that want accepts,
// the best match for query (words of the conversation, a description of
// what is needed) first, by Okapi BM25 over each tool's name, description
// and parameter names, with English stemming ("creates issues" finds
// create_issue). Tools sharing no word with query are left out.
func (r *Registry) Search(query string, n int, want func(name string) bool) []string {
	if n <= 0 {
		return nil
	}
	set := r.set.Load()
	set.indexOnce.Do(func() { set.index = newToolIndex(set) })
	return set.index.search(query, n, want)
}

// paramNames are the property names of a tool's parameter schema.
func paramNames(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// stopWords carry no meaning for choosing a tool.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"can": true, "do": true, "for": true, "from": true, "i": true, "if": true, "in": true, "is": true,
	"it": true, "me": true, "my": true, "of": true, "on": true, "or": true, "please": true, "that": true,
	"the": true, "this": true, "to": true, "was": true, "what": true, "with": true, "you": true, "your": true,
}

// terms are the words of s as the index keeps them: split at anything
// but letters and digits and where camelCase changes case, folded to
// lower case without accents, stop words left out, stemmed.
func terms(s string) []string {
	var out []string
	for _, w := range splitWords(s) {
		w = foldWord(w)
		if w == "" || stopWords[w] {
			continue
		}
		out = append(out, english.Stem(w, false))
	}
	return out
}

// splitWords splits at non-alphanumerics and at a lower-to-upper case
// change ("listPullRequests" → list, Pull, Requests).
func splitWords(s string) []string {
	var words []string
	start := -1
	var prev rune
	for i, r := range s {
		alnum := unicode.IsLetter(r) || unicode.IsNumber(r)
		switch {
		case !alnum:
			if start >= 0 {
				words = append(words, s[start:i])
				start = -1
			}
		case start < 0:
			start = i
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			words = append(words, s[start:i])
			start = i
		}
		prev = r
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words
}

func foldWord(w string) string {
	w = strings.ToLower(w)
	for _, r := range w {
		if r >= 0x80 {
			f, _, err := transform.String(transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC), w)
			if err == nil {
				return f
			}
			break
		}
	}
	return w
}
