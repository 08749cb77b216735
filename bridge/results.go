package bridge

// Tool results: how a terminal observation becomes the tool result stored
// with the task and served by tasks/get, tasks/result and synchronous calls.

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/adapters"
)

// Result helpers.

// outcome is the stored terminal outcome.
type outcome struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}},
		IsError: true,
	}
}

// toolResultText is an inlined CallToolResult with one text block.
func toolResultText(text string, isError bool) json.RawMessage {
	return marshalToolResult([]map[string]any{{"type": "text", "text": text}}, nil, isError)
}

func marshalToolResult(content []map[string]any, structured map[string]any, isError bool) json.RawMessage {
	r := map[string]any{"resultType": "complete", "content": content, "isError": isError}
	if structured != nil {
		r["structuredContent"] = structured
	}
	b, _ := json.Marshal(r)
	return b
}

// toolResultJSON turns a terminal observation into the inlined tool result.
func toolResultJSON(o adapters.Observation, ref adapters.JobRef, maxBytes int) json.RawMessage {
	text := ""
	var structured map[string]any
	if o.Result != nil {
		text = o.Result.Text
		structured = o.Result.Structured
	}
	if text == "" {
		switch o.State {
		case adapters.StateSucceeded:
			text = fmt.Sprintf("Job %s succeeded.", ref.ID)
		case adapters.StateToolError:
			text = fmt.Sprintf("Job %s failed.", ref.ID)
		default:
			text = fmt.Sprintf("Job %s was cancelled.", ref.ID)
		}
		if m := sanitize(o.Message, 1024); m != "" {
			text += " " + m
		}
	}
	if len(o.Links) > 0 {
		var sb strings.Builder
		sb.WriteString(text)
		sb.WriteString("\n")
		for _, l := range o.Links {
			fmt.Fprintf(&sb, "\n%s: %s", l.Title, l.URL)
		}
		text = sb.String()
	}
	if len(text) > maxBytes {
		text = truncateUTF8(text, maxBytes) + fmt.Sprintf("\n[result cut at %d bytes, the server's limit]", maxBytes)
	}
	if structured != nil {
		if b, err := json.Marshal(structured); err != nil || len(b) > maxBytes {
			structured = map[string]any{"truncated": true, "note": fmt.Sprintf("the structured result exceeded %d bytes, the server's limit", maxBytes)}
		}
	}
	return marshalToolResult([]map[string]any{{"type": "text", "text": text}}, structured, o.State != adapters.StateSucceeded)
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func failure(o adapters.Observation) (int, string) {
	code, msg := -32603, sanitize(o.Message, 1024)
	if o.Error != nil {
		if o.Error.Code != 0 {
			code = o.Error.Code
		}
		if o.Error.Message != "" {
			msg = sanitize(o.Error.Message, 1024)
		}
	}
	if msg == "" {
		msg = "the job failed at the protocol level"
	}
	return code, msg
}
