package discord

// The model's plan (the plan tool's EventPlan), shown natively: a
// Components V2 container (flag IS_COMPONENTS_V2: a heading, the steps a
// numbered line each with a status mark, the turn's tool runs as tasks
// below a separator) sent once and edited in place as the plan changes.
// Where Discord refuses V2 (an Invalid Form Body answer to the first
// one), the listener says so once and shows plans as an embed from then
// on, edited the same way. The plan's message is the turn's: the next
// turn's plan is a new one.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/places"
)

// planColor is the plan's accent colour (the container's bar, the
// embed's), Discord's blurple.
const planColor = 0x5865F2

// The plan's text within Discord's limits: a V2 message's text displays
// hold 4,000 characters together, an embed's description 4,096. Its
// steps get planStepsLimit, its tasks the rest.
const (
	planStepsLimit = 3200
	planTasksLimit = 600
)

// discordPlan is the plan a place shows for the turn under way.
type discordPlan struct {
	places.ShownPlan
	id    string // the message that shows it, "" until sent
	embed bool   // shown as an embed (Discord refused V2)
}

// planMarks are a step's status in the plan's lines.
var planMarks = map[string]string{
	switchboard.PlanPending:    "⬜",
	switchboard.PlanInProgress: "⏳",
	switchboard.PlanDone:       "✅",
	switchboard.PlanFailed:     "❌",
}

func planMark(status string) string {
	if m, ok := planMarks[status]; ok {
		return m
	}
	return planMarks[switchboard.PlanPending]
}

// planEvent shows what an event changes of the turn's plan: a new
// version of it (in the message of the turn's plan if there is one, kept
// with the binding across a restart), or a tool run as a task of it
// (places.ShownPlan.Take).
func (f *follow) planEvent(ctx context.Context, ev any) {
	if _, ok := ev.(*switchboard.PlanData); ok && f.plan == nil {
		f.plan = &discordPlan{id: f.state.Plan}
	}
	if f.plan != nil && f.plan.Take(ev) {
		f.renderPlan(ctx)
	}
}

// endPlan ends the turn's plan: it stays as it was last shown.
func (f *follow) endPlan(ctx context.Context) {
	if f.plan == nil && f.state.Plan == "" {
		return
	}
	f.plan, f.state.Plan = nil, ""
	f.save(ctx)
}

// renderPlan sends the plan, or edits its message to the plan as it
// stands. A failed edit is tried again with the next change.
func (f *follow) renderPlan(ctx context.Context) {
	p := f.plan
	if p.id == "" {
		p.id, p.embed = f.sendPlan(ctx)
		if p.id != "" {
			f.state.Plan = p.id
			f.save(ctx)
		}
		return
	}
	edit := &discordgo.MessageEdit{ID: p.id, Channel: f.b.Address, AllowedMentions: mentionsNone()}
	if p.embed || f.l.noV2.Load() {
		embeds := []*discordgo.MessageEmbed{planEmbed(&p.ShownPlan)}
		edit.Embeds = &embeds
	} else {
		comps := planComponents(&p.ShownPlan)
		edit.Components = &comps
		edit.Flags = discordgo.MessageFlagsIsComponentsV2
	}
	if _, err := f.l.dg.ChannelMessageEditComplex(edit, discordgo.WithContext(ctx)); err != nil {
		f.l.log.Warn("discord: edit the plan", "place", f.b.Address, "err", err)
	}
}

// sendPlan sends the plan's message, a V2 container unless Discord
// refused one, and returns its id ("" if it could not be sent) and
// whether it is an embed.
func (f *follow) sendPlan(ctx context.Context) (string, bool) {
	p := f.plan
	if !f.l.noV2.Load() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		m := &discordgo.MessageSend{Components: planComponents(&p.ShownPlan), Flags: discordgo.MessageFlagsIsComponentsV2, AllowedMentions: noMentions}
		msg, err := f.l.dg.ChannelMessageSendComplex(f.b.Address, m, discordgo.WithContext(sctx))
		switch {
		case err == nil:
			return msg.ID, false
		case isInvalidForm(err):
			if f.l.noV2.CompareAndSwap(false, true) {
				f.l.log.Warn("discord: Discord refused a Components V2 message: plans are shown as embeds until a restart",
					"place", f.b.Address, "err", err)
			}
		default:
			f.l.log.Error("discord: send the plan", "place", f.b.Address, "err", err)
			return "", false
		}
	}
	if msg := f.send(ctx, &discordgo.MessageSend{Embeds: []*discordgo.MessageEmbed{planEmbed(&p.ShownPlan)}}); msg != nil {
		return msg.ID, true
	}
	return "", true
}

// planLines are the plan's steps and its tasks as Discord Markdown, each
// part cut to its share of the limits.
func planLines(p *places.ShownPlan) (steps, tasks string) {
	var b strings.Builder
	for i, st := range p.Steps {
		title := mdEscape(st.Title)
		if st.Status == switchboard.PlanInProgress {
			title = "**" + title + "**"
		}
		fmt.Fprintf(&b, "%d. %s %s\n", i+1, planMark(st.Status), title)
	}
	steps = truncateDiscord(strings.TrimSuffix(b.String(), "\n"), planStepsLimit)
	if len(p.Tasks) > 0 {
		parts := make([]string, len(p.Tasks))
		for i, t := range p.Tasks {
			parts[i] = planMark(t.Status) + " `" + codeSafe(t.Name) + "`"
		}
		tasks = truncateDiscord("-# 🔧 "+strings.Join(parts, "  "), planTasksLimit)
	}
	return steps, tasks
}

// planComponents is the plan as a V2 container: at most five components
// of Discord's forty, and at most 4,000 characters of text.
func planComponents(p *places.ShownPlan) []discordgo.MessageComponent {
	steps, tasks := planLines(p)
	kids := []discordgo.MessageComponent{
		discordgo.TextDisplay{Content: "### " + mdEscape(p.Heading())},
		discordgo.TextDisplay{Content: steps},
	}
	if tasks != "" {
		kids = append(kids, discordgo.Separator{}, discordgo.TextDisplay{Content: tasks})
	}
	color := planColor
	return []discordgo.MessageComponent{discordgo.Container{AccentColor: &color, Components: kids}}
}

// planEmbed is the plan as an embed, where V2 is refused.
func planEmbed(p *places.ShownPlan) *discordgo.MessageEmbed {
	steps, tasks := planLines(p)
	if tasks != "" {
		steps += "\n\n" + tasks
	}
	return &discordgo.MessageEmbed{Title: p.Heading(), Description: steps, Color: planColor}
}
