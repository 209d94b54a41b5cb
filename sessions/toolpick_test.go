package sessions_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/providers/openai/openaitest"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/tools"
)

// codeHost is what an MCP server for a code host brings: thirty tools.
var codeHost = [][2]string{
	{"create_issue", "Create a new issue in a repository."},
	{"list_issues", "List the issues of a repository."},
	{"add_issue_comment", "Add a comment to an issue."},
	{"close_issue", "Close an issue."},
	{"assign_issue", "Assign an issue to someone."},
	{"add_labels", "Add labels to an issue or pull request."},
	{"list_pull_requests", "List the pull requests of a repository."},
	{"merge_pull_request", "Merge a pull request."},
	{"review_pull_request", "Leave a review on a pull request."},
	{"create_branch", "Create a branch."},
	{"delete_branch", "Delete a branch."},
	{"get_file_contents", "Read a file from a repository."},
	{"search_code", "Search code across repositories."},
	{"list_commits", "List the commits of a branch."},
	{"create_release", "Publish a release for a tag."},
	{"delete_repository", "Delete a repository for good."},
	{"fork_repository", "Fork a repository."},
	{"star_repository", "Star a repository."},
	{"list_workflows", "List the CI workflows of a repository."},
	{"run_workflow", "Start a CI workflow run."},
	{"get_workflow_logs", "Read the logs of a CI workflow run."},
	{"create_gist", "Create a gist."},
	{"list_notifications", "List unread notifications."},
	{"mark_notifications_read", "Mark notifications as read."},
	{"list_collaborators", "List who can push to a repository."},
	{"invite_collaborator", "Invite someone to push to a repository."},
	{"create_webhook", "Create a webhook."},
	{"list_webhooks", "List webhooks."},
	{"delete_webhook", "Delete a webhook."},
	{"list_deploy_keys", "List deploy keys."},
}

// withCodeHost registers the code host's tools; each answers with its name.
func withCodeHost(t *testing.T) option {
	return func(c *sessions.Config) {
		var ts []tools.Tool
		for _, d := range codeHost {
			name := "gh." + d[0]
			ts = append(ts, tools.Tool{Name: name, Description: d[1], Parameters: json.RawMessage(`{"type":"object"}`),
				Execute: func(ctx context.Context, args json.RawMessage) (tools.Result, error) {
					return tools.Result{Content: "ran " + name}, nil
				}})
		}
		if err := c.Tools.SetGroup("gh", ts); err != nil {
			t.Fatal(err)
		}
	}
}

// offeredIn are the tools a request carried, by the names the model sees.
func offeredIn(r openaitest.Request) []string {
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Function.Name)
	}
	return names
}

// A guide with more tools than its tools_max offers the pinned ones and
// those that fit what was asked, with find_tools; never all of them.
func TestAGuideWithManyToolsOffersThoseThatFit(t *testing.T) {
	h := newHarness(t, withCodeHost(t))
	h.llm.Push(openaitest.Reply{Text: []string{"Done."}})
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "many"})
	c.say("Please open an issue in acme/web: the login page is broken")
	c.reply()
	got := offeredIn(lastRequest(t, h.llm))
	if len(got) > 6 {
		t.Fatalf("a request carried %d tools, over the guide's tools_max of 6: %v", len(got), got)
	}
	for _, want := range []string{"calculator", "gh__create_issue", "find_tools"} {
		if !slices.Contains(got, want) {
			t.Errorf("the request lacks %s: %v", want, got)
		}
	}
	if slices.Contains(got, "gh__delete_repository") {
		t.Errorf("a tool that has nothing to do with the question was offered: %v", got)
	}

	// /tools says how it goes.
	c.say("/tools")
	if m := c.until(switchboard.EventMessage, func(p any) bool {
		return p.(*switchboard.MessageData).Role == switchboard.RoleSystem
	}).(*switchboard.MessageData); !strings.Contains(m.Content, "at most 6 of these 31 tools") {
		t.Errorf("/tools says %q", m.Content)
	}

	// A guide whose tools fit is offered them all, and no find_tools.
	h.llm.Push(openaitest.Reply{Text: []string{"Done."}})
	c2 := h.attach(sessions.AttachOptions{Author: alice, Guide: "tester"})
	c2.say("hello")
	c2.reply()
	if got := offeredIn(lastRequest(t, h.llm)); slices.Contains(got, "find_tools") || len(got) != 5 {
		t.Errorf("the tester guide's five tools were offered as %v", got)
	}
}

// The model asks for a tool it was not offered, finds it, and calls it in
// the same turn; what the turn offers only grows.
func TestFindToolsAddsToolsToTheTurn(t *testing.T) {
	h := newHarness(t, withCodeHost(t))
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "f1", Name: "find_tools", Args: `{"query":"start a CI workflow run"}`}}},
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "r1", Name: "gh__run_workflow", Args: `{}`}}},
		openaitest.Reply{Text: []string{"Started."}},
	)
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "many"})
	c.say("Please comment on issue 7 that it is fixed")
	if got := c.reply().Content; got != "Started." {
		t.Fatalf("answered %q", got)
	}
	reqs := h.llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	first, second, third := offeredIn(reqs[0]), offeredIn(reqs[1]), offeredIn(reqs[2])
	if slices.Contains(first, "gh__run_workflow") {
		t.Fatalf("the first request already offered run_workflow: %v", first)
	}
	results := h.llm.ToolResults()
	if len(results) == 0 || !strings.Contains(results[0], "gh.run_workflow") {
		t.Fatalf("find_tools answered %q", results)
	}
	if !slices.Contains(second, "gh__run_workflow") || !slices.Contains(third, "gh__run_workflow") {
		t.Fatalf("the tool found was not offered next: %v then %v", second, third)
	}
	for _, name := range first {
		if !slices.Contains(second, name) {
			t.Errorf("%s was offered, then not in the same turn: %v then %v", name, first, second)
		}
	}
	ran := false
	for _, ev := range c.got {
		if p, _ := ev.Payload(); ev.Type == switchboard.EventToolResponse {
			res := p.(*switchboard.ToolResponseData)
			ran = ran || res.Name == "gh.run_workflow" && res.ContentPreview == "ran gh.run_workflow" && !res.IsError
		}
	}
	if !ran {
		t.Fatalf("run_workflow did not run: %s", c.types())
	}
}

// What find_tools found in a turn is stored with it: a turn waiting for
// an approval across a restart still offers it. A call to a tool no
// request carried is answered with a pointer to find_tools.
func TestToolsFoundSurviveARestart(t *testing.T) {
	h := newHarness(t, withCodeHost(t))
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{
			{ID: "f1", Name: "find_tools", Args: `{"query":"delete a webhook","limit":2}`},
			{ID: "c1", Name: "calculator", Args: `{"expression":"2+2"}`},
			{ID: "d1", Name: "gh__delete_repository", Args: `{}`},
		}},
		openaitest.Reply{Text: []string{"Both done."}},
	)
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "many"})
	c.say("Please star acme/web")
	req := c.until(switchboard.EventConfirmationRequest, nil).(*switchboard.ConfirmationRequestData)
	h.restart()

	c2 := h.attach(sessions.AttachOptions{SessionID: c.id, Author: alice, AfterSeq: 0})
	c2.submit(switchboard.Input{Kind: switchboard.InputConfirm, ConfirmationID: req.ConfirmationID, Approved: true})
	if got := c2.reply().Content; got != "Both done." {
		t.Fatalf("answered %q", got)
	}
	last := offeredIn(lastRequest(t, h.llm))
	for _, want := range []string{"gh__delete_webhook", "calculator", "find_tools"} {
		if !slices.Contains(last, want) {
			t.Errorf("after the restart the turn's request lacks %s: %v", want, last)
		}
	}
	if slices.Contains(last, "gh__delete_repository") {
		t.Errorf("a tool never offered nor found was offered after a call to it: %v", last)
	}
	results := h.llm.ToolResults()
	if len(results) != 3 || !strings.Contains(results[0], "gh.delete_webhook") || results[1] != "4" || !strings.Contains(results[2], "use find_tools") {
		t.Errorf("tool results %q", results)
	}
}

// A find_tools call the model gets wrong is answered with what to fix,
// and the turn goes on.
func TestFindToolsRefusesBadInput(t *testing.T) {
	h := newHarness(t, withCodeHost(t))
	h.llm.Push(
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{
			{ID: "f1", Name: "find_tools", Args: `{"query":"   "}`},
			{ID: "f2", Name: "find_tools", Args: `{"query":"` + strings.Repeat("x", 501) + `"}`},
			{ID: "f3", Name: "find_tools", Args: `{"query":"zebra marmalade quantum"}`},
			{ID: "u1", Name: "gh__no_such_tool", Args: `{}`},
		}},
		openaitest.Reply{Text: []string{"Sorry."}},
	)
	c := h.attach(sessions.AttachOptions{Author: alice, Guide: "many"})
	c.say("do something odd")
	if got := c.reply().Content; got != "Sorry." {
		t.Fatalf("answered %q", got)
	}
	results := h.llm.ToolResults()
	want := []string{"query is empty", "at most 500", "No tool you do not have already matches", "use find_tools"}
	if len(results) != len(want) {
		t.Fatalf("tool results %q", results)
	}
	for i, w := range want {
		if !strings.Contains(results[i], w) {
			t.Errorf("result %d = %q, want it to say %q", i, results[i], w)
		}
	}
}
