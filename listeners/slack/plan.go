package slack

// The model's plan (the plan tool's EventPlan), shown natively: where the
// place takes native streams, as a stream of its own in Slack's plan
// display (chat.startStream with task_display_mode plan, a plan_update
// chunk for its title and a task_update chunk for each step and each tool
// run, appended as they change, stopped as the turn ends); elsewhere as a
// Block Kit checklist posted once and edited in place (chat.update). The
// plan's message is the turn's: the next turn's plan is a new one.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	slackapi "github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// slackPlan is the plan a place shows for the turn under way.
type slackPlan struct {
	places.ShownPlan
	ts     string // the message that shows it, "" until posted
	native bool   // a stream, not a posted message
	// sent is, for a stream, what each task (by id) was last sent as,
	// and the plan's title: only what changed is appended.
	sent  map[string]slackapi.TaskUpdateChunk
	title string
}

// planEvent shows what an event changes of the turn's plan: a new
// version of it (in the message of the turn's plan if there is one), or a
// tool run as a task of it (places.ShownPlan.Take).
func (f *follow) planEvent(ctx context.Context, ev any) {
	if d, ok := ev.(*switchboard.PlanData); ok {
		if f.plan != nil && f.plan.native && len(d.Steps) < len(f.plan.Steps) {
			// A stream cannot take a task back: a shorter plan is a new one.
			f.endPlan(ctx)
		}
		if f.plan == nil {
			f.plan = &slackPlan{}
		}
	}
	if f.plan != nil && f.plan.Take(ev) {
		f.renderPlan(ctx)
	}
}

// endPlan ends the turn's plan: a stream is stopped as it stands.
func (f *follow) endPlan(ctx context.Context) {
	p := f.plan
	f.plan = nil
	if p == nil || !p.native || p.ts == "" {
		return
	}
	if err := f.l.retry(ctx, func() error {
		_, _, err := f.l.api.StopStreamContext(ctx, f.at.channel, p.ts)
		return err
	}); err != nil {
		f.l.log.Warn("slack: stop the plan's stream", "place", f.b.Address, "err", err)
	}
}

// adoptPlan takes a checklist posted before a restart as the turn's plan.
func (f *follow) adoptPlan(ts string, d *switchboard.PlanData) {
	f.plan = &slackPlan{ShownPlan: places.ShownPlan{Steps: d.Steps}, ts: ts}
}

// renderPlan shows the plan as it stands: started as a stream where the
// place takes one, else posted; then appended to, or edited.
func (f *follow) renderPlan(ctx context.Context) {
	p := f.plan
	switch {
	case p.ts == "":
		if thread := f.streamThread(); thread != "" && f.startPlanStream(ctx, thread) {
			return
		}
		text, blocks := planBlocks(&p.ShownPlan)
		p.ts = f.post(ctx, text, blocks)
	case p.native:
		f.appendPlan(ctx)
	default:
		text, blocks := planBlocks(&p.ShownPlan)
		if err := f.l.retry(ctx, func() error {
			_, _, _, err := f.l.api.UpdateMessageContext(ctx, f.at.channel, p.ts, slackapi.MsgOptionText(text, false), slackapi.MsgOptionBlocks(blocks...))
			return err
		}); err != nil {
			f.l.log.Warn("slack: update the plan", "place", f.b.Address, "err", err)
		}
	}
}

// startPlanStream starts the plan's stream, reporting whether it did. A
// refusal is handled as a reply's (streamRefused): the plan is posted
// instead, and so is it on any other failure.
func (f *follow) startPlanStream(ctx context.Context, thread string) bool {
	p := f.plan
	chunks := p.changed()
	ts, err := f.startStream(ctx, thread, slackapi.MsgOptionTaskDisplayMode(slackapi.TaskDisplayModePlan), slackapi.MsgOptionChunks(chunks...))
	if err != nil {
		var se slackapi.SlackErrorResponse
		if errors.As(err, &se) {
			f.streamRefused(se)
		} else {
			f.l.log.Warn("slack: start the plan's stream; posted instead", "place", f.b.Address, "err", err)
		}
		p.sent, p.title = nil, ""
		return false
	}
	p.ts, p.native = ts, true
	return true
}

// appendPlan appends what changed to the plan's stream. What fails is
// sent again with the next change.
func (f *follow) appendPlan(ctx context.Context) {
	p := f.plan
	before, title := cloneSent(p.sent), p.title
	chunks := p.changed()
	if len(chunks) == 0 {
		return
	}
	if err := f.l.retry(ctx, func() error {
		_, _, err := f.l.api.AppendStreamContext(ctx, f.at.channel, p.ts, slackapi.MsgOptionChunks(chunks...))
		return err
	}); err != nil {
		p.sent, p.title = before, title
		f.l.log.Warn("slack: append to the plan's stream", "place", f.b.Address, "err", err)
	}
}

func cloneSent(m map[string]slackapi.TaskUpdateChunk) map[string]slackapi.TaskUpdateChunk {
	out := make(map[string]slackapi.TaskUpdateChunk, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// changed is the chunks that bring a stream from what was sent to the
// plan as it stands, and notes them as sent: the plan's title, then a
// task_update for each step ("step_1", …) and each tool run (its call id)
// that is new or changed.
func (p *slackPlan) changed() []slackapi.StreamChunk {
	if p.sent == nil {
		p.sent = map[string]slackapi.TaskUpdateChunk{}
	}
	var chunks []slackapi.StreamChunk
	if h := p.Heading(); h != p.title {
		chunks = append(chunks, slackapi.NewPlanUpdateChunk(h))
		p.title = h
	}
	add := func(id, title, status string) {
		c := slackapi.NewTaskUpdateChunk(id, title)
		c.Status = taskStatus(status)
		if was, ok := p.sent[id]; ok && was.Title == c.Title && was.Status == c.Status {
			return
		}
		p.sent[id] = c
		chunks = append(chunks, c)
	}
	for i, st := range p.Steps {
		add("step_"+strconv.Itoa(i+1), st.Title, st.Status)
	}
	for _, t := range p.Tasks {
		add(t.ID, t.Name, t.Status)
	}
	return chunks
}

// taskStatus is a plan step's status as Slack's tasks take it.
func taskStatus(status string) slackapi.TaskCardStatus {
	switch status {
	case switchboard.PlanInProgress:
		return "in_progress"
	case switchboard.PlanDone:
		return "complete"
	case switchboard.PlanFailed:
		return "error"
	}
	return "pending"
}

// planMarks are a step's status in a Block Kit checklist.
var planMarks = map[string]string{
	switchboard.PlanPending:    ":white_circle:",
	switchboard.PlanInProgress: ":hourglass_flowing_sand:",
	switchboard.PlanDone:       ":white_check_mark:",
	switchboard.PlanFailed:     ":x:",
}

// planBlocks is the plan as a Block Kit checklist, within Slack's
// limits: its heading, then its steps a numbered line each, in sections
// of at most maxSectionText characters (20 steps of 120 characters fit
// in a few), then its tool runs in one context line.
func planBlocks(p *places.ShownPlan) (string, []slackapi.Block) {
	heading := p.Heading()
	blocks := []slackapi.Block{slackapi.NewSectionBlock(mrkdwnText("*"+mrkdwnEscape(heading)+"*"), nil, nil)}
	var text, section strings.Builder
	text.WriteString(heading)
	flush := func() {
		if section.Len() > 0 {
			blocks = append(blocks, slackapi.NewSectionBlock(mrkdwnText(section.String()), nil, nil))
			section.Reset()
		}
	}
	for i, st := range p.Steps {
		mark := planMarks[st.Status]
		if mark == "" {
			mark = planMarks[switchboard.PlanPending]
		}
		line := truncateMrkdwn(fmt.Sprintf("%d. %s %s", i+1, mark, mrkdwnEscape(st.Title)), maxSectionText)
		if section.Len() > 0 && section.Len()+1+len(line) > maxSectionText {
			flush()
		}
		if section.Len() > 0 {
			section.WriteString("\n")
		}
		section.WriteString(line)
		fmt.Fprintf(&text, "\n%d. %s", i+1, st.Title)
	}
	flush()
	if len(p.Tasks) > 0 {
		lines := make([]string, len(p.Tasks))
		for i, t := range p.Tasks {
			lines[i] = planMarks[t.Status] + " `" + mrkdwnEscape(t.Name) + "`"
		}
		blocks = append(blocks, contextLine(":wrench: "+strings.Join(lines, "  ")))
	}
	return fallback(text.String(), heading), blocks
}
