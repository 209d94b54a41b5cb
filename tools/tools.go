// Package tools holds the capabilities the model may call and the registry
// that runs them safely: arguments are checked against each tool's JSON
// Schema before the tool sees them, a panic becomes an error, and a tool
// that ignores its context cannot hold up the turn.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/switchboard-gw/switchboard"
)

// Tool is one capability the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema (draft 2020-12) of the arguments
	// object; empty means an object with no declared properties.
	Parameters json.RawMessage
	// SecurityWarning, when set, is shown with approval prompts for this tool.
	SecurityWarning string
	// Execute runs the tool on arguments that already passed the schema.
	Execute func(ctx context.Context, args json.RawMessage) (Result, error)
}

// Result is what a tool returns: Content goes back to the model; UI, when
// set, is shown to the users.
type Result struct {
	Content string
	UI      *switchboard.UI
	// Images are pictures the tool made (a chart a sandboxed run drew),
	// inline (Data and MIMEType): shown to the users in every channel.
	Images []switchboard.UIImage
	// Plan, when set, is the plan the model now shows people (the plan
	// tool): the session emits it as an EventPlan.
	Plan *switchboard.PlanData
}

// Errors callers tell apart with errors.Is: the model asked for a tool that
// does not exist, or gave it arguments that do not fit its schema. Both are
// the model's mistake to correct, unlike a tool that failed.
var (
	ErrUnknownTool = errors.New("unknown tool")
	ErrInvalidArgs = errors.New("invalid arguments")
)

// emptySchema stands in for a tool without Parameters, so that every tool
// offers the providers an object schema.
const emptySchema = `{"type":"object","properties":{}}`

// toolName is what every supported provider accepts as a function name.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// maxValidationMessages keeps a validation error short enough for the
// model to read and act on.
const maxValidationMessages = 5

// Registry is the set of tools the gateway knows, with their compiled
// schemas. The built-ins are fixed when it is built; a group (the tools of
// one MCP server, named "server.tool") may be replaced at any time with
// SetGroup. Readers see one consistent set without a lock.
type Registry struct {
	set     atomic.Pointer[toolSet]
	mu      sync.Mutex // serialises SetGroup
	printer *message.Printer
}

// toolSet is one version of the registry's tools, never changed once
// published.
type toolSet struct {
	tools   map[string]Tool
	schemas map[string]*jsonschema.Schema
	names   []string
	groups  map[string][]string // group → its tools' names
	// index ranks the set's tools for Search, built on first use.
	indexOnce sync.Once
	index     *toolIndex
}

// NewRegistry compiles every tool's schema up front, so a broken schema
// stops the gateway at start-up rather than failing a conversation later.
func NewRegistry(tools ...Tool) (*Registry, error) {
	set := &toolSet{
		tools:   make(map[string]Tool, len(tools)),
		schemas: make(map[string]*jsonschema.Schema, len(tools)),
		groups:  map[string][]string{},
	}
	for _, t := range tools {
		if !toolName.MatchString(t.Name) {
			return nil, fmt.Errorf("tools: tool %q: name must be 1-64 letters, digits, _ or -", t.Name)
		}
		if err := set.add(t); err != nil {
			return nil, err
		}
	}
	slices.Sort(set.names)
	r := &Registry{printer: message.NewPrinter(language.English)}
	r.set.Store(set)
	return r, nil
}

// add compiles t's schema and adds it.
func (set *toolSet) add(t Tool) error {
	if _, dup := set.tools[t.Name]; dup {
		return fmt.Errorf("tools: tool %q: registered twice", t.Name)
	}
	if t.Execute == nil {
		return fmt.Errorf("tools: tool %q: no Execute func", t.Name)
	}
	if len(bytes.TrimSpace(t.Parameters)) == 0 {
		t.Parameters = json.RawMessage(emptySchema)
	}
	sch, err := compile(t.Name, t.Parameters)
	if err != nil {
		return fmt.Errorf("tools: tool %q: schema: %w", t.Name, err)
	}
	set.tools[t.Name] = t
	set.schemas[t.Name] = sch
	set.names = append(set.names, t.Name)
	return nil
}

// groupTool is the name of a tool in a group: "server.tool", each part
// letters, digits, _ or -.
var groupTool = regexp.MustCompile(`^([a-z][a-z0-9_-]{0,30})\.([A-Za-z0-9_-]{1,64})$`)

// SetGroup replaces the tools of a group (an MCP server's) with ts, whose
// names must be "group.tool". A tool that cannot be used (a bad name, a
// schema that is not valid JSON Schema) is left out, and the returned
// error names each; the others are in place when SetGroup returns. An
// empty ts removes the group.
func (r *Registry) SetGroup(group string, ts []Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.set.Load()
	next := &toolSet{
		tools:   make(map[string]Tool, len(cur.tools)+len(ts)),
		schemas: make(map[string]*jsonschema.Schema, len(cur.tools)+len(ts)),
		groups:  make(map[string][]string, len(cur.groups)+1),
	}
	for g, names := range cur.groups {
		if g != group {
			next.groups[g] = names
		}
	}
	for _, name := range cur.names {
		if g, _, ok := strings.Cut(name, "."); ok && g == group {
			continue
		}
		next.tools[name], next.schemas[name] = cur.tools[name], cur.schemas[name]
		next.names = append(next.names, name)
	}
	var errs []error
	var added []string
	for _, t := range ts {
		if m := groupTool.FindStringSubmatch(t.Name); m == nil || m[1] != group {
			errs = append(errs, fmt.Errorf("tools: tool %q: not a name of group %q (%s.<letters, digits, _ or ->)", t.Name, group, group))
			continue
		}
		if err := next.add(t); err != nil {
			errs = append(errs, err)
			continue
		}
		added = append(added, t.Name)
	}
	if len(added) > 0 {
		slices.Sort(added)
		next.groups[group] = added
	}
	slices.Sort(next.names)
	r.set.Store(next)
	return errors.Join(errs...)
}

// Group lists the tools of a group now, sorted; none when it has none or
// is not known.
func (r *Registry) Group(group string) []string {
	return slices.Clone(r.set.Load().groups[group])
}

func compile(name string, schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// A scheme no loader serves: a $ref to anything outside the schema
	// fails to compile instead of reaching for the file system.
	loc := "mem://tools/" + url.PathEscape(name) + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// Lookup returns the tool with the given name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	t, ok := r.set.Load().tools[name]
	return t, ok
}

// Names returns the names of all tools, sorted.
func (r *Registry) Names() []string { return slices.Clone(r.set.Load().names) }

// Validate checks args against the tool's schema. The error is meant for
// the model: it names the offending field by JSON pointer and says what is
// wrong, so the model can correct its next call.
func (r *Registry) Validate(name string, args json.RawMessage) error {
	_, err := r.check(r.set.Load(), name, args)
	return err
}

// check validates args and returns them normalised: empty or null
// arguments become {}, since models send either for a tool without
// parameters.
func (r *Registry) check(set *toolSet, name string, args json.RawMessage) (json.RawMessage, error) {
	sch, ok := set.schemas[name]
	if !ok {
		return nil, fmt.Errorf("%w %q; available: %s", ErrUnknownTool, name, strings.Join(set.names, ", "))
	}
	if trimmed := bytes.TrimSpace(args); len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		args = json.RawMessage("{}")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, fmt.Errorf("%w for %s: not valid JSON: %v", ErrInvalidArgs, name, err)
	}
	if err := sch.Validate(doc); err != nil {
		var verr *jsonschema.ValidationError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("%w for %s: %s", ErrInvalidArgs, name, r.describe(verr))
		}
		return nil, fmt.Errorf("%w for %s: %v", ErrInvalidArgs, name, err)
	}
	return args, nil
}

// Run validates args and executes the tool. Execute runs in its own
// goroutine: if ctx ends first, Run returns at once with ctx's error, and a
// tool that ignores ctx is abandoned rather than waited for. A panic in the
// tool is returned as an error.
func (r *Registry) Run(ctx context.Context, name string, args json.RawMessage) (Result, error) {
	set := r.set.Load() // one version: a group replaced meanwhile does not matter
	args, err := r.check(set, name, args)
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("tool %s: %w", name, err)
	}
	type outcome struct {
		res Result
		err error
	}
	// Buffered, so an abandoned tool can still finish and be collected.
	done := make(chan outcome, 1)
	exec := set.tools[name].Execute
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{err: fmt.Errorf("tool %s panicked: %v", name, v)}
			}
		}()
		res, err := exec(ctx, args)
		if err != nil {
			err = fmt.Errorf("%s: %w", name, err)
		}
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-ctx.Done():
		// A result that raced the deadline still counts.
		select {
		case o := <-done:
			return o.res, o.err
		default:
		}
		return Result{}, fmt.Errorf("tool %s: %w", name, ctx.Err())
	}
}

// describe flattens a validation error tree into at most a few lines of
// "at <pointer>: <problem>", leaving out the intermediate nodes that only
// say "validation failed".
func (r *Registry) describe(verr *jsonschema.ValidationError) string {
	var msgs []string
	r.collect(verr, &msgs)
	// The validator visits properties in map order; sorting makes the
	// message stable, so the same mistake reads the same every time.
	slices.Sort(msgs)
	msgs = slices.Compact(msgs)
	if len(msgs) == 0 {
		return verr.LocalizedError(r.printer)
	}
	if n := len(msgs) - maxValidationMessages; n > 0 {
		msgs = append(msgs[:maxValidationMessages], fmt.Sprintf("and %d more", n))
	}
	return strings.Join(msgs, "; ")
}

func (r *Registry) collect(e *jsonschema.ValidationError, msgs *[]string) {
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		if len(e.Causes) > 0 {
			// Alternatives: any one of them would do, so say so in one line
			// instead of listing every branch's failures as separate faults.
			alts := make([]string, 0, len(e.Causes))
			for _, c := range e.Causes {
				var sub []string
				r.collect(c, &sub)
				slices.Sort(sub)
				alts = append(alts, strings.Join(sub, ", "))
			}
			*msgs = append(*msgs, "none of the alternatives match: "+strings.Join(alts, " or "))
			return
		}
	}
	if len(e.Causes) == 0 {
		*msgs = append(*msgs, fmt.Sprintf("at %s: %s", pointer(e.InstanceLocation), r.problem(e.ErrorKind)))
		return
	}
	for _, c := range e.Causes {
		r.collect(c, msgs)
	}
}

// problem words a few messages whose default text is schema jargon.
func (r *Registry) problem(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.MinProperties:
		if k.Want == 1 {
			return "is empty; set at least one property"
		}
		return fmt.Sprintf("needs at least %d properties, got %d", k.Want, k.Got)
	case *kind.FalseSchema:
		return "not allowed"
	}
	return k.LocalizedString(r.printer)
}

// pointer renders a JSON pointer (RFC 6901) to the bad value.
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return "(root)"
	}
	var sb strings.Builder
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(esc.Replace(t))
	}
	return sb.String()
}
