package switchboard

// UI is a channel-neutral component (CONTRACT §5) that each listener renders
// in its own idiom: Block Kit, Discord embeds and components, HTML, numbered
// text. Every part is optional, so one card can carry text, fields, an image,
// buttons, a select and a form together.
//
// Every interactive element has an ActionID unique within the session; a
// click or submit comes back as an InputAction with that ID.
type UI struct {
	ID      string     `json:"id"`
	Title   string     `json:"title,omitempty"`
	Text    string     `json:"text,omitempty"` // Markdown
	Fields  []UIField  `json:"fields,omitempty"`
	Image   *UIImage   `json:"image,omitempty"`
	Buttons []UIButton `json:"buttons,omitempty"`
	Select  *UISelect  `json:"select,omitempty"`
	Form    *UIForm    `json:"form,omitempty"`
}

// UIField is one label/value line of a card.
type UIField struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// UIImage is shown by URL or inline as base64 data.
type UIImage struct {
	URL      string `json:"url,omitempty"`
	Data     string `json:"data,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
	Alt      string `json:"alt,omitempty"`
}

// UIButton is one clickable button; Style is "primary", "danger" or empty.
type UIButton struct {
	ActionID string `json:"action_id"`
	Label    string `json:"label"`
	Value    string `json:"value,omitempty"`
	Style    string `json:"style,omitempty"`
}

// UISelect is a single choice from a list.
type UISelect struct {
	ActionID    string     `json:"action_id"`
	Placeholder string     `json:"placeholder,omitempty"`
	Options     []UIOption `json:"options"`
}

// UIOption is one choice of a select.
type UIOption struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// UIForm is a small form; submitting it sends the values as a JSON object.
type UIForm struct {
	ActionID    string        `json:"action_id"`
	SubmitLabel string        `json:"submit_label,omitempty"`
	Inputs      []UIFormInput `json:"inputs"`
}

// UIFormInput is one field of a form; Type is "text", "number", "email" or
// "textarea".
type UIFormInput struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Type        string `json:"type,omitempty"`
	Required    bool   `json:"required,omitempty"`
	Placeholder string `json:"placeholder,omitempty"`
}
