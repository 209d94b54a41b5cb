package discordtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Routes of the REST API the fake serves, named the way Discord's
// documentation writes them. Calls, Requests, FailNext, RateLimit and
// SetRouteLimit take these.
const (
	RouteGetGateway                  = "GET /gateway"
	RouteGetGatewayBot               = "GET /gateway/bot"
	RouteGetCurrentUser              = "GET /users/@me"
	RouteGetUser                     = "GET /users/{user.id}"
	RouteCreateDM                    = "POST /users/@me/channels"
	RouteGetCurrentApplication       = "GET /applications/@me"
	RouteGetChannel                  = "GET /channels/{channel.id}"
	RouteGetMessages                 = "GET /channels/{channel.id}/messages"
	RouteGetMessage                  = "GET /channels/{channel.id}/messages/{message.id}"
	RouteCreateMessage               = "POST /channels/{channel.id}/messages"
	RouteEditMessage                 = "PATCH /channels/{channel.id}/messages/{message.id}"
	RouteDeleteMessage               = "DELETE /channels/{channel.id}/messages/{message.id}"
	RouteStartThreadFromMessage      = "POST /channels/{channel.id}/messages/{message.id}/threads"
	RouteStartThreadWithoutMessage   = "POST /channels/{channel.id}/threads"
	RouteTriggerTyping               = "POST /channels/{channel.id}/typing"
	RouteCreateReaction              = "PUT /channels/{channel.id}/messages/{message.id}/reactions/{emoji}/@me"
	RouteDeleteOwnReaction           = "DELETE /channels/{channel.id}/messages/{message.id}/reactions/{emoji}/@me"
	RouteGetGuild                    = "GET /guilds/{guild.id}"
	RouteGetGuildMember              = "GET /guilds/{guild.id}/members/{user.id}"
	RouteGetGlobalCommands           = "GET /applications/{application.id}/commands"
	RouteBulkOverwriteGlobalCommands = "PUT /applications/{application.id}/commands"
	RouteGetGuildCommands            = "GET /applications/{application.id}/guilds/{guild.id}/commands"
	RouteBulkOverwriteGuildCommands  = "PUT /applications/{application.id}/guilds/{guild.id}/commands"
	RouteCreateInteractionResponse   = "POST /interactions/{interaction.id}/{interaction.token}/callback"
	RouteGetOriginalResponse         = "GET /webhooks/{application.id}/{interaction.token}/messages/@original"
	RouteEditOriginalResponse        = "PATCH /webhooks/{application.id}/{interaction.token}/messages/@original"
	RouteDeleteOriginalResponse      = "DELETE /webhooks/{application.id}/{interaction.token}/messages/@original"
	RouteCreateFollowup              = "POST /webhooks/{application.id}/{interaction.token}"
	RouteGetFollowup                 = "GET /webhooks/{application.id}/{interaction.token}/messages/{message.id}"
	RouteEditFollowup                = "PATCH /webhooks/{application.id}/{interaction.token}/messages/{message.id}"
	RouteDeleteFollowup              = "DELETE /webhooks/{application.id}/{interaction.token}/messages/{message.id}"
)

// Discord's JSON error codes the fake answers.
const (
	CodeUnknownChannel           = 10003
	CodeUnknownGuild             = 10004
	CodeUnknownMember            = 10007
	CodeUnknownMessage           = 10008
	CodeUnknownUser              = 10013
	CodeUnknownEmoji             = 10014
	CodeUnknownWebhook           = 10015
	CodeUnknownInteraction       = 10062
	CodeRequestEntityTooLarge    = 40005
	CodeAlreadyAcknowledged      = 40060
	CodeMissingAccess            = 50001
	CodeMissingPermissions       = 50013
	CodeCannotEditOthersMessage  = 50005
	CodeEmptyMessage             = 50006
	CodeCannotSendToUser         = 50007
	CodeInvalidWebhookToken      = 50027
	CodeInvalidFormBody          = 50035
	CodeInvalidJSON              = 50109
	CodeThreadAlreadyCreated     = 160004
	CodeCannotExecuteOnDMChannel = 50003
)

type route struct {
	name     string
	method   string
	segs     []string
	literals int
	auth     bool
	handler  func(*call) result
}

// call is one REST request being answered.
type call struct {
	s      *Server
	r      *http.Request
	route  *route
	params map[string]string
	body   []byte // JSON body, or payload_json of a multipart body
	files  []Attachment
	query  url.Values
	rec    *Request
	// bucketHeader holds the X-RateLimit-* headers of the request's bucket.
	bucketHeader http.Header
}

func (c *call) param(name string) string { return c.params[name] }

// result is one answer: a status, a JSON body (nil for none) and headers.
type result struct {
	status int
	body   any
	header http.Header
}

func okJSON(v any) result { return result{status: http.StatusOK, body: v} }
func noContent() result   { return result{status: http.StatusNoContent} }
func errorResult(e *Error) result {
	return result{status: e.Status, body: e.body()}
}

// Error is an error answer of Discord's REST API: an HTTP status and the
// JSON body {"code":…,"message":…[,"errors":…]}. ValidateMessage and
// ValidateModal return one for payloads Discord would refuse.
type Error struct {
	Status  int
	Code    int
	Message string
	// Fields lists the problems of a 50035 Invalid Form Body, each at the
	// path Discord reports it.
	Fields []FieldError
}

// FieldError is one problem of an Invalid Form Body.
type FieldError struct {
	// Path is where the problem is, the way discord.js prints it, e.g.
	// "components[0].components" or "embeds[0].fields[3].value".
	Path    string
	Code    string // e.g. "BASE_TYPE_MAX_LENGTH"
	Message string // e.g. "Must be 2000 or fewer in length."
	segs    []any
}

// Error renders the error as Discord libraries do: "50035 Invalid Form
// Body: content[BASE_TYPE_MAX_LENGTH]: Must be 2000 or fewer in length.",
// problems joined with "; ".
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.Code, e.Message)
	for i, f := range e.Fields {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s[%s]: %s", f.Path, f.Code, f.Message)
	}
	return b.String()
}

// body renders the JSON Discord answers, nesting field errors by path:
// {"errors":{"components":{"0":{"components":{"_errors":[…]}}}}}.
func (e *Error) body() map[string]any {
	out := map[string]any{"code": e.Code, "message": e.Message}
	if len(e.Fields) == 0 {
		return out
	}
	root := map[string]any{}
	for _, f := range e.Fields {
		node := root
		for _, seg := range f.segs {
			key := fmt.Sprint(seg)
			next, ok := node[key].(map[string]any)
			if !ok {
				next = map[string]any{}
				node[key] = next
			}
			node = next
		}
		list, _ := node["_errors"].([]any)
		node["_errors"] = append(list, map[string]any{"code": f.Code, "message": f.Message})
	}
	out["errors"] = root
	return out
}

func apiErr(status, code int, msg string) *Error {
	return &Error{Status: status, Code: code, Message: msg}
}

var (
	errUnauthorized        = apiErr(http.StatusUnauthorized, 0, "401: Unauthorized")
	errNotFound            = apiErr(http.StatusNotFound, 0, "404: Not Found")
	errMethodNotAllowed    = apiErr(http.StatusMethodNotAllowed, 0, "405: Method Not Allowed")
	errUnknownChannel      = apiErr(http.StatusNotFound, CodeUnknownChannel, "Unknown Channel")
	errUnknownGuild        = apiErr(http.StatusNotFound, CodeUnknownGuild, "Unknown Guild")
	errUnknownMember       = apiErr(http.StatusNotFound, CodeUnknownMember, "Unknown Member")
	errUnknownMessage      = apiErr(http.StatusNotFound, CodeUnknownMessage, "Unknown Message")
	errUnknownUser         = apiErr(http.StatusNotFound, CodeUnknownUser, "Unknown User")
	errUnknownEmoji        = apiErr(http.StatusBadRequest, CodeUnknownEmoji, "Unknown Emoji")
	errUnknownWebhook      = apiErr(http.StatusNotFound, CodeUnknownWebhook, "Unknown Webhook")
	errUnknownInteraction  = apiErr(http.StatusNotFound, CodeUnknownInteraction, "Unknown interaction")
	errAlreadyAcked        = apiErr(http.StatusBadRequest, CodeAlreadyAcknowledged, "Interaction has already been acknowledged.")
	errMissingAccess       = apiErr(http.StatusForbidden, CodeMissingAccess, "Missing Access")
	errMissingPermissions  = apiErr(http.StatusForbidden, CodeMissingPermissions, "Missing Permissions")
	errCannotEditOthers    = apiErr(http.StatusForbidden, CodeCannotEditOthersMessage, "Cannot edit a message authored by another user")
	errEmptyMessage        = apiErr(http.StatusBadRequest, CodeEmptyMessage, "Cannot send an empty message")
	errCannotSendToUser    = apiErr(http.StatusForbidden, CodeCannotSendToUser, "Cannot send messages to this user")
	errInvalidWebhookToken = apiErr(http.StatusUnauthorized, CodeInvalidWebhookToken, "Invalid Webhook Token")
	errInvalidJSON         = apiErr(http.StatusBadRequest, CodeInvalidJSON, "The request body contains invalid JSON.")
	errEntityTooLarge      = apiErr(http.StatusRequestEntityTooLarge, CodeRequestEntityTooLarge, "Request entity too large")
	errThreadExists        = apiErr(http.StatusBadRequest, CodeThreadAlreadyCreated, "A thread has already been created for this message")
	errDMChannel           = apiErr(http.StatusBadRequest, CodeCannotExecuteOnDMChannel, "Cannot execute action on a DM channel")
)

var apiPrefix = regexp.MustCompile(`^/api/v(\d+)(/.*)$`)

// handleAPI answers /api/v{9,10}/…: it routes, authenticates, applies
// injected faults and rate limits, runs the handler and records the
// request.
func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	now, real := s.now(), time.Now()
	m := apiPrefix.FindStringSubmatch(r.URL.EscapedPath())
	rec := &Request{Method: r.Method, Query: r.URL.Query(), ContentType: r.Header.Get("Content-Type"), Time: now, Received: real}
	if m == nil || (m[1] != "9" && m[1] != "10") {
		s.finish(w, rec, errorResult(errNotFound))
		return
	}
	rec.APIVersion = m[1]
	rec.Path, _ = url.PathUnescape(m[2])
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bot "); ok {
		rec.Token = t
	}
	raw, _ := io.ReadAll(r.Body)
	rec.Body = raw

	rt, params, status := matchRoute(r.Method, m[2])
	if rt == nil {
		if status == http.StatusMethodNotAllowed {
			s.finish(w, rec, errorResult(errMethodNotAllowed))
		} else {
			s.finish(w, rec, errorResult(errNotFound))
		}
		return
	}
	rec.Route, rec.Params = rt.name, params
	c := &call{s: s, r: r, route: rt, params: params, query: rec.Query, rec: rec}

	res := func() result {
		if rt.auth && r.Header.Get("Authorization") != "Bot "+s.cfg.token {
			return errorResult(errUnauthorized)
		}
		// Parse the body before faults so the recorded request shows what
		// was sent even when it is refused.
		if e := c.parseBody(raw); e != nil {
			return errorResult(e)
		}
		rec.Body, rec.Files = c.body, c.files
		if res, ok := s.injectedFault(rt.name, c); ok {
			return res
		}
		if res, limited := s.takeBucket(c); limited {
			return res
		}
		res := rt.handler(c)
		if res.header == nil {
			res.header = http.Header{}
		}
		for k, v := range c.bucketHeader {
			res.header[k] = v
		}
		return res
	}()
	s.finish(w, rec, res)
}

// finish records the request and writes the answer.
func (s *Server) finish(w http.ResponseWriter, rec *Request, res result) {
	rec.Status = res.status
	if res.status >= 400 && res.body != nil {
		var head struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if b, err := json.Marshal(res.body); err == nil && json.Unmarshal(b, &head) == nil {
			rec.Code, rec.Message = head.Code, head.Message
		}
	}
	rec.Bucket = res.header.Get("X-RateLimit-Bucket")
	s.mu.Lock()
	s.requests = append(s.requests, *rec)
	s.notifyLocked()
	s.mu.Unlock()

	for k, v := range res.header {
		w.Header()[k] = v
	}
	if res.body == nil {
		w.WriteHeader(res.status)
		return
	}
	writeJSON(w, res.status, res.body)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// parseBody reads a JSON body, or a multipart/form-data body with a
// payload_json part and files[n] parts (how Discord takes uploads).
func (c *call) parseBody(raw []byte) *Error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	mt, mp, _ := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		if !json.Valid(raw) {
			return errInvalidJSON
		}
		c.body = raw
		return nil
	case "multipart/form-data":
		mr := multipart.NewReader(bytes.NewReader(raw), mp["boundary"])
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return apiErr(http.StatusBadRequest, 0, "400: Bad Request")
			}
			data, _ := io.ReadAll(p)
			name := p.FormName()
			switch {
			case name == "payload_json":
				if !json.Valid(data) {
					return errInvalidJSON
				}
				c.body = data
			case strings.HasPrefix(name, "files[") || strings.HasPrefix(name, "file"):
				if len(data) > c.s.cfg.maxAttachmentBytes {
					return errEntityTooLarge
				}
				ct := p.Header.Get("Content-Type")
				if ct == "" {
					ct = "application/octet-stream"
				}
				// Until it is stored, an upload's ID is its n in files[n],
				// which the payload's attachments entries refer to.
				n := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(name, "files["), "file"), "]")
				if n == "" {
					n = strconv.Itoa(len(c.files))
				}
				c.files = append(c.files, Attachment{ID: n, Filename: p.FileName(), ContentType: ct, Size: len(data), Data: data})
			}
		}
		return nil
	default:
		// Discord ignores bodies it cannot read; the handler then sees no
		// fields, which usually ends in a 50006 or 50035.
		return nil
	}
}

// --- routing ---

var routes []*route

func init() {
	add := func(name string, auth bool, h func(*call) result) {
		method, path, _ := strings.Cut(name, " ")
		segs := strings.Split(strings.Trim(path, "/"), "/")
		lit := 0
		for _, sgm := range segs {
			if !strings.HasPrefix(sgm, "{") {
				lit++
			}
		}
		routes = append(routes, &route{name: name, method: method, segs: segs, literals: lit, auth: auth, handler: h})
	}
	add(RouteGetGateway, false, (*call).getGateway)
	add(RouteGetGatewayBot, true, (*call).getGatewayBot)
	add(RouteGetCurrentUser, true, (*call).getCurrentUser)
	add(RouteGetUser, true, (*call).getUser)
	add(RouteCreateDM, true, (*call).createDM)
	add(RouteGetCurrentApplication, true, (*call).getCurrentApplication)
	add(RouteGetChannel, true, (*call).getChannel)
	add(RouteGetMessages, true, (*call).getMessages)
	add(RouteGetMessage, true, (*call).getMessage)
	add(RouteCreateMessage, true, (*call).createMessage)
	add(RouteEditMessage, true, (*call).editMessage)
	add(RouteDeleteMessage, true, (*call).deleteMessage)
	add(RouteStartThreadFromMessage, true, (*call).startThreadFromMessage)
	add(RouteStartThreadWithoutMessage, true, (*call).startThreadWithoutMessage)
	add(RouteTriggerTyping, true, (*call).triggerTyping)
	add(RouteCreateReaction, true, (*call).createReaction)
	add(RouteDeleteOwnReaction, true, (*call).deleteOwnReaction)
	add(RouteGetGuild, true, (*call).getGuild)
	add(RouteGetGuildMember, true, (*call).getGuildMember)
	add(RouteGetGlobalCommands, true, (*call).getCommands)
	add(RouteBulkOverwriteGlobalCommands, true, (*call).overwriteCommands)
	add(RouteGetGuildCommands, true, (*call).getCommands)
	add(RouteBulkOverwriteGuildCommands, true, (*call).overwriteCommands)
	// Interaction endpoints authenticate with the interaction token, not
	// the bot token.
	add(RouteCreateInteractionResponse, false, (*call).interactionCallback)
	add(RouteGetOriginalResponse, false, (*call).getWebhookMessage)
	add(RouteEditOriginalResponse, false, (*call).editWebhookMessage)
	add(RouteDeleteOriginalResponse, false, (*call).deleteWebhookMessage)
	add(RouteCreateFollowup, false, (*call).createFollowup)
	add(RouteGetFollowup, false, (*call).getWebhookMessage)
	add(RouteEditFollowup, false, (*call).editWebhookMessage)
	add(RouteDeleteFollowup, false, (*call).deleteWebhookMessage)
}

// matchRoute finds the route for method and the (escaped) path, preferring
// routes with more literal segments (/users/@me over /users/{user.id}). It
// answers 404 or 405 when none fits.
func matchRoute(method, escapedPath string) (*route, map[string]string, int) {
	raw := strings.Split(strings.Trim(escapedPath, "/"), "/")
	segs := make([]string, len(raw))
	for i, r := range raw {
		segs[i], _ = url.PathUnescape(r)
	}
	var best *route
	var bestParams map[string]string
	pathMatched := false
	for _, rt := range routes {
		if len(rt.segs) != len(segs) {
			continue
		}
		params := map[string]string{}
		ok := true
		for i, p := range rt.segs {
			if strings.HasPrefix(p, "{") {
				if segs[i] == "" {
					ok = false
					break
				}
				params[strings.Trim(p, "{}")] = segs[i]
			} else if p != segs[i] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		pathMatched = true
		if rt.method != method {
			continue
		}
		if best == nil || rt.literals > best.literals {
			best, bestParams = rt, params
		}
	}
	if best != nil {
		return best, bestParams, http.StatusOK
	}
	if pathMatched {
		return nil, nil, http.StatusMethodNotAllowed
	}
	return nil, nil, http.StatusNotFound
}

// --- fault injection and rate limits ---

type failure struct {
	status     int
	body       []byte
	retryAfter time.Duration
	global     bool
}

// FailNext makes the next call of route answer status with body (raw JSON;
// "" for Discord's generic body for that status, e.g. {"message":
// "502: Bad Gateway","code":0}). Calls queue: FailNext twice fails the
// next two calls. discordgo retries a 502 by itself (up to
// Session.MaxRestRetries times) and returns *discordgo.RESTError for other
// statuses.
func (s *Server) FailNext(route string, status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := []byte(body)
	if body == "" {
		b, _ = json.Marshal(map[string]any{"message": fmt.Sprintf("%d: %s", status, http.StatusText(status)), "code": 0})
	}
	s.failures[route] = append(s.failures[route], failure{status: status, body: b})
}

// RateLimit makes the next n calls of route answer 429 the way Discord
// does: {"message":"You are being rate limited.","retry_after":<seconds,
// float>,"global":global} with a Retry-After header (whole seconds, rounded
// up). A route limit also carries X-RateLimit-Remaining 0 and
// X-RateLimit-Reset-After retryAfter with scope "user"; a global one
// carries X-RateLimit-Global and scope "global" and no bucket headers.
// discordgo sleeps retry_after and sends the request again.
func (s *Server) RateLimit(route string, retryAfter time.Duration, n int, global bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures[route] = append(s.failures[route], failure{status: http.StatusTooManyRequests, retryAfter: retryAfter, global: global})
	}
}

// SetRouteLimit overrides the rate-limit bucket of one route (see
// WithBucketLimit), e.g. SetRouteLimit(RouteEditMessage, 5, 5*time.Second)
// to model Discord's message edit bucket.
func (s *Server) SetRouteLimit(route string, limit int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits[route] = routeLimit{limit: limit, window: window}
}

type routeLimit struct {
	limit  int
	window time.Duration
}

type bucket struct {
	remaining int
	reset     time.Time // real time
}

// majorKey is the route's rate-limit key: the route and its major
// parameter, as Discord buckets them.
func (c *call) majorKey() string {
	for _, p := range []string{"channel.id", "guild.id", "interaction.token"} {
		if v, ok := c.params[p]; ok {
			return c.route.name + "|" + v
		}
	}
	return c.route.name
}

func bucketHash(route string) string {
	h := fnv.New64a()
	h.Write([]byte(route))
	return strconv.FormatUint(h.Sum64(), 16)
}

func (s *Server) injectedFault(routeName string, c *call) (result, bool) {
	s.mu.Lock()
	q := s.failures[routeName]
	if len(q) == 0 {
		s.mu.Unlock()
		return result{}, false
	}
	f := q[0]
	s.failures[routeName] = q[1:]
	limit := s.routeLimitLocked(routeName)
	s.mu.Unlock()
	if f.status == http.StatusTooManyRequests {
		return tooManyRequests(f.retryAfter, f.global, limit.limit, bucketHash(routeName)), true
	}
	return result{status: f.status, body: json.RawMessage(f.body)}, true
}

func tooManyRequests(retryAfter time.Duration, global bool, limit int, hash string) result {
	secs := math.Ceil(retryAfter.Seconds()*1000) / 1000
	h := http.Header{}
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	if global {
		h.Set("X-RateLimit-Global", "true")
		h.Set("X-RateLimit-Scope", "global")
	} else {
		h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", formatSeconds(float64(time.Now().Add(retryAfter).UnixMilli())/1000))
		h.Set("X-RateLimit-Reset-After", formatSeconds(secs))
		h.Set("X-RateLimit-Bucket", hash)
		h.Set("X-RateLimit-Scope", "user")
	}
	return result{status: http.StatusTooManyRequests, header: h, body: map[string]any{
		"message": "You are being rate limited.", "retry_after": secs, "global": global,
	}}
}

func (s *Server) routeLimitLocked(routeName string) routeLimit {
	if l, ok := s.limits[routeName]; ok {
		return l
	}
	return routeLimit{limit: s.cfg.bucketLimit, window: s.cfg.bucketWindow}
}

// takeBucket spends one request of the call's bucket. It returns a 429 when
// the bucket is empty; otherwise it leaves the X-RateLimit-* headers to be
// added to the answer.
func (s *Server) takeBucket(c *call) (result, bool) {
	now := time.Now()
	s.mu.Lock()
	limit := s.routeLimitLocked(c.route.name)
	key := c.majorKey()
	b, ok := s.buckets[key]
	if !ok || !now.Before(b.reset) {
		b = &bucket{remaining: limit.limit, reset: now.Add(limit.window)}
		s.buckets[key] = b
	}
	hash := bucketHash(c.route.name)
	if b.remaining <= 0 {
		wait := b.reset.Sub(now)
		s.mu.Unlock()
		return tooManyRequests(wait, false, limit.limit, hash), true
	}
	b.remaining--
	remaining, reset := b.remaining, b.reset
	s.mu.Unlock()
	h := http.Header{}
	h.Set("X-RateLimit-Limit", strconv.Itoa(limit.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	// Rounded up to the millisecond, so a client that waits Reset-After
	// never comes back a fraction early.
	h.Set("X-RateLimit-Reset", formatSeconds(math.Ceil(float64(reset.UnixMicro())/1000)/1000))
	h.Set("X-RateLimit-Reset-After", formatSeconds(math.Ceil(float64(reset.Sub(now).Microseconds())/1000)/1000))
	h.Set("X-RateLimit-Bucket", hash)
	c.rec.Bucket = hash
	c.bucketHeader = h
	return result{}, false
}

func formatSeconds(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }

// --- recording accessors ---

// Calls is how many requests route has received, refused ones included.
func (s *Server) Calls(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Route == route {
			n++
		}
	}
	return n
}

// Requests returns copies of the recorded requests of route in arrival
// order; with route "" it returns all of them.
func (s *Server) Requests(route string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if route == "" || r.Route == route {
			out = append(out, r.clone())
		}
	}
	return out
}
