package slacktest

import (
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// A streamed message's tasks and plan (chat.startStream, appendStream and
// stopStream chunks): task_update chunks add a task or change one by its
// id, a plan_update chunk sets the plan's title. Slack shows them as task
// cards interleaved with the text (task_display_mode timeline, the
// default) or together in one plan block (plan).

// Task is a task of a streamed message, as it stands after every chunk.
type Task struct {
	ID      string
	Title   string
	Status  string // pending, in_progress, complete, error
	Details string
	Output  string
}

// MaxTaskText is the most characters of a task's details or output.
const MaxTaskText = 256

// taskUpdate is one task_update or plan_update chunk, checked.
type taskUpdate struct {
	plan  bool   // a plan_update: Title is the plan's
	title string // the plan's title
	task  Task
}

// parseTaskChunk checks a task_update or plan_update chunk as Slack does:
// a plan needs a title; a task an id, a title and a known status, its
// details and output at most MaxTaskText characters.
func parseTaskChunk(typ string, ch map[string]json.RawMessage) (taskUpdate, bool) {
	str := func(k string) string {
		var s string
		_ = json.Unmarshal(ch[k], &s)
		return s
	}
	if typ == "plan_update" {
		t := str("title")
		return taskUpdate{plan: true, title: t}, t != ""
	}
	t := Task{ID: str("id"), Title: str("title"), Status: str("status"), Details: str("details"), Output: str("output")}
	switch {
	case t.ID == "", t.Title == "":
		return taskUpdate{}, false
	case !slices.Contains([]string{"pending", "in_progress", "complete", "error"}, t.Status):
		return taskUpdate{}, false
	case utf8.RuneCountInString(t.Details) > MaxTaskText, utf8.RuneCountInString(t.Output) > MaxTaskText:
		return taskUpdate{}, false
	}
	return taskUpdate{task: t}, true
}

// applyTasks applies checked chunks to m, in order.
func applyTasks(m *Message, updates []taskUpdate) {
	for _, u := range updates {
		if u.plan {
			m.PlanTitle = u.title
			continue
		}
		i := slices.IndexFunc(m.Tasks, func(t Task) bool { return t.ID == u.task.ID })
		if i < 0 {
			m.Tasks = append(m.Tasks, u.task)
		} else {
			m.Tasks[i] = u.task
		}
	}
}
