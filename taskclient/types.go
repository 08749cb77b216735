package taskclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Task states.
const (
	StatusWorking       = "working"
	StatusInputRequired = "input_required"
	StatusCompleted     = "completed"
	StatusFailed        = "failed"
	StatusCancelled     = "cancelled"
)

// Task is a task as returned by tools/call (a CreateTaskResult) or tasks/get
// (a DetailedTask). Only the field matching Status among InputRequests,
// Result and Error is set by a conforming server.
type Task struct {
	ResultType     string                  `json:"resultType"`
	TaskID         string                  `json:"taskId"`
	Status         string                  `json:"status"`
	StatusMessage  string                  `json:"statusMessage,omitempty"`
	CreatedAt      string                  `json:"createdAt"`
	LastUpdatedAt  string                  `json:"lastUpdatedAt"`
	TTLMs          *int64                  `json:"ttlMs"`
	PollIntervalMs *int64                  `json:"pollIntervalMs,omitempty"`
	InputRequests  map[string]InputRequest `json:"inputRequests,omitempty"`
	Result         *ToolResult             `json:"result,omitempty"`
	Error          *RPCError               `json:"error,omitempty"`
	// Raw is the result exactly as received.
	Raw json.RawMessage `json:"-"`
}

// Terminal reports whether the task is completed, failed or cancelled.
func (t *Task) Terminal() bool {
	switch t.Status {
	case StatusCompleted, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Poll interval bounds: the default when the server gives none, and the
// floor applied to what it gives.
const (
	DefaultPollInterval = time.Second
	MinPollInterval     = 10 * time.Millisecond
)

// PollInterval is how long to wait before the next tasks/get: the server's
// pollIntervalMs, or [DefaultPollInterval] when absent, never less than
// [MinPollInterval].
func (t *Task) PollInterval() time.Duration {
	if t.PollIntervalMs == nil {
		return DefaultPollInterval
	}
	d := time.Duration(*t.PollIntervalMs) * time.Millisecond
	return max(d, MinPollInterval)
}

func decodeTask(raw json.RawMessage) (*Task, error) {
	var t Task
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	if t.TaskID == "" {
		return nil, errors.New("task has no taskId")
	}
	t.Raw = raw
	return &t, nil
}

// ToolResult is a tool's result (CallToolResult).
type ToolResult struct {
	ResultType        string          `json:"resultType,omitempty"`
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	// Raw is the result exactly as received.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the result and keeps its raw bytes.
func (r *ToolResult) UnmarshalJSON(data []byte) error {
	type plain ToolResult
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*r = ToolResult(p)
	r.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// Text returns the text of the result's text content blocks, joined by
// newlines.
func (r *ToolResult) Text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func decodeToolResult(raw json.RawMessage) (*ToolResult, error) {
	var r ToolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Content is one content block of a tool result. The common fields are
// decoded; Raw holds the whole block.
type Content struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	Data     string `json:"data,omitempty"` // base64, for image and audio
	URI      string `json:"uri,omitempty"`  // for resource_link
	Name     string `json:"name,omitempty"` // for resource_link
	// Resource is the embedded resource of a "resource" block.
	Resource *EmbeddedResource `json:"resource,omitempty"`
	Raw      json.RawMessage   `json:"-"`
}

// EmbeddedResource is the resource of a "resource" content block.
type EmbeddedResource struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

// UnmarshalJSON decodes the block and keeps its raw bytes.
func (c *Content) UnmarshalJSON(data []byte) error {
	type plain Content
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*c = Content(p)
	c.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// InputRequest is one server-to-client request inside inputRequests, such as
// an elicitation.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// MethodElicit is the method of an elicitation input request.
const MethodElicit = "elicitation/create"

// Elicitation decodes the params of an elicitation/create input request.
func (r InputRequest) Elicitation() (*ElicitParams, error) {
	if r.Method != MethodElicit {
		return nil, fmt.Errorf("input request method is %q, not %s", r.Method, MethodElicit)
	}
	var p ElicitParams
	if err := json.Unmarshal(r.Params, &p); err != nil {
		return nil, fmt.Errorf("decoding elicitation params: %w", err)
	}
	if p.Mode == "" {
		p.Mode = "form"
	}
	return &p, nil
}

// ElicitParams are the params of elicitation/create. Mode is "form" (with
// RequestedSchema) or "url" (with URL).
type ElicitParams struct {
	Mode            string        `json:"mode,omitempty"`
	Message         string        `json:"message"`
	RequestedSchema *ElicitSchema `json:"requestedSchema,omitempty"`
	URL             string        `json:"url,omitempty"`
}

// ElicitSchema is the flat object schema of a form elicitation. Properties
// keep the order in which the server listed them.
type ElicitSchema struct {
	Type       string
	Properties []Property
	Required   []string
}

// IsRequired reports whether the named property is required.
func (s *ElicitSchema) IsRequired(name string) bool {
	for _, r := range s.Required {
		if r == name {
			return true
		}
	}
	return false
}

// Property is one field of an [ElicitSchema]: a string, number, integer or
// boolean, a single-select enum (Enum or OneOf), or a multi-select array
// (Items).
type Property struct {
	Name        string          `json:"-"`
	Type        string          `json:"type"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Default     json.RawMessage `json:"default,omitempty"`
	Enum        []string        `json:"enum,omitempty"`
	OneOf       []EnumOption    `json:"oneOf,omitempty"`
	Items       *Property       `json:"items,omitempty"`
	AnyOf       []EnumOption    `json:"anyOf,omitempty"` // options of multi-select items
	Format      string          `json:"format,omitempty"`
}

// EnumOption is a titled choice ({const, title}).
type EnumOption struct {
	Const string `json:"const"`
	Title string `json:"title,omitempty"`
}

// Choices lists the allowed values of a single- or multi-select property,
// nil for a free-form one.
func (p *Property) Choices() []string {
	src := p
	if p.Type == "array" && p.Items != nil {
		src = p.Items
	}
	if len(src.Enum) > 0 {
		return src.Enum
	}
	opts := src.OneOf
	if len(opts) == 0 {
		opts = src.AnyOf
	}
	var out []string
	for _, o := range opts {
		out = append(out, o.Const)
	}
	return out
}

// UnmarshalJSON decodes the schema, keeping the order of its properties.
func (s *ElicitSchema) UnmarshalJSON(data []byte) error {
	var raw struct {
		Type       string          `json:"type"`
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*s = ElicitSchema{Type: raw.Type, Required: raw.Required}
	if len(raw.Properties) == 0 || string(raw.Properties) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Properties))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("decoding schema properties: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("decoding schema properties: not an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("decoding schema properties: %w", err)
		}
		name, _ := tok.(string)
		var p Property
		if err := dec.Decode(&p); err != nil {
			return fmt.Errorf("decoding schema property %q: %w", name, err)
		}
		p.Name = name
		s.Properties = append(s.Properties, p)
	}
	return nil
}

// MarshalJSON encodes the schema with its properties in order.
func (s ElicitSchema) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	typ, _ := json.Marshal(s.Type)
	b.Write(typ)
	b.WriteString(`,"properties":{`)
	for i, p := range s.Properties {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(p.Name)
		val, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	if len(s.Required) > 0 {
		req, _ := json.Marshal(s.Required)
		b.WriteString(`,"required":`)
		b.Write(req)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Elicitation response actions.
const (
	ActionAccept  = "accept"
	ActionDecline = "decline"
	ActionCancel  = "cancel"
)

// ElicitResult answers an elicitation input request (a value of
// inputResponses).
type ElicitResult struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}
