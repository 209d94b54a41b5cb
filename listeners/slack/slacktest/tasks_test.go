package slacktest_test

import (
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/switchboard-gw/switchboard/listeners/slack/slacktest"
)

// A stream's task_update and plan_update chunks: tasks added and changed
// by id, the plan's title set, what Slack refuses refused.
func TestStreamingTasks(t *testing.T) {
	srv, api := newServer(t)
	q := srv.PostUserMessage(slacktest.UserMessage{Channel: channel, User: alice, Text: "plan it"})
	opts := []slack.MsgOption{slack.MsgOptionTS(q.TS), slack.MsgOptionRecipientUserID(alice), slack.MsgOptionRecipientTeamID(srv.TeamID())}

	_, _, err := api.StartStream(channel, append(opts, slack.MsgOptionTaskDisplayMode("grid"))...)
	slackErr(t, err, "invalid_arguments")
	_, ts, err := api.StartStream(channel, append(opts, slack.MsgOptionTaskDisplayMode(slack.TaskDisplayModePlan),
		slack.MsgOptionChunks(slack.NewPlanUpdateChunk("Plan"), slack.TaskUpdateChunk{Type: slack.StreamChunkTaskUpdate, ID: "s1", Title: "Find", Status: "in_progress"}))...)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]slack.StreamChunk{
		"no id":          slack.TaskUpdateChunk{Type: slack.StreamChunkTaskUpdate, Title: "x", Status: "pending"},
		"no title":       slack.TaskUpdateChunk{Type: slack.StreamChunkTaskUpdate, ID: "x", Status: "pending"},
		"unknown status": slack.TaskUpdateChunk{Type: slack.StreamChunkTaskUpdate, ID: "x", Title: "x", Status: "done"},
		"long output":    slack.TaskUpdateChunk{Type: slack.StreamChunkTaskUpdate, ID: "x", Title: "x", Status: "complete", Output: strings.Repeat("o", 257)},
		"untitled plan":  slack.NewPlanUpdateChunk(""),
	} {
		_, _, err := api.AppendStream(channel, ts, slack.MsgOptionChunks(bad))
		if err == nil || !strings.Contains(err.Error(), "invalid_chunks") {
			t.Errorf("%s: err = %v, want invalid_chunks", name, err)
		}
	}
	if _, _, err := api.AppendStream(channel, ts, slack.MsgOptionChunks(
		slack.TaskUpdateChunk{Type: slack.StreamChunkTaskUpdate, ID: "s1", Title: "Find it", Status: "complete"},
		slack.TaskUpdateChunk{Type: slack.StreamChunkTaskUpdate, ID: "s2", Title: "Tell", Status: "error"},
		slack.NewPlanUpdateChunk("Plan, done"))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.StopStream(channel, ts); err != nil {
		t.Fatal(err)
	}
	m, _ := srv.Message(channel, ts)
	want := []slacktest.Task{{ID: "s1", Title: "Find it", Status: "complete"}, {ID: "s2", Title: "Tell", Status: "error"}}
	if m.TaskDisplayMode != "plan" || m.PlanTitle != "Plan, done" || len(m.Tasks) != 2 || m.Tasks[0] != want[0] || m.Tasks[1] != want[1] {
		t.Fatalf("streamed plan = mode %q, title %q, tasks %+v", m.TaskDisplayMode, m.PlanTitle, m.Tasks)
	}
}
