package taskclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newSDKServer serves a stateless go-sdk MCP server with one tool, greet,
// that asks for the name by MRTR elicitation when it is missing. It checks
// that what taskclient sends passes the official SDK's header and _meta
// validation.
func newSDKServer(t *testing.T) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "sdk-fixture", Version: "1.0.0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	type greetIn struct {
		Name string `json:"name,omitempty"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "says hello"},
		func(_ context.Context, req *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, any, error) {
			name := in.Name
			if r, ok := req.Params.InputResponses["who"].(*mcp.ElicitResult); ok && r.Action == "accept" {
				name, _ = r.Content["name"].(string)
			}
			if name == "" {
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{"who": &mcp.ElicitParams{
						Message: "Who are you?",
						RequestedSchema: map[string]any{"type": "object",
							"properties": map[string]any{"name": map[string]any{"type": "string"}},
							"required":   []string{"name"}},
					}},
					RequestState: "round-1",
				}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + name + "!"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestInteropWithSDKServer(t *testing.T) {
	c := &Client{URL: newSDKServer(t), Elicitation: true, ClientName: "interop", ClientVersion: "1"}
	ctx := t.Context()

	disc, err := c.Discover(ctx)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if disc.ResultType != ResultComplete || disc.ServerInfo == nil || disc.ServerInfo.Name != "sdk-fixture" {
		t.Errorf("discover = %+v, want resultType complete and serverInfo sdk-fixture", disc)
	}

	tools, err := c.ListTools(ctx)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if len(tools) != 1 || tools[0].Name != "greet" {
		t.Errorf("tools = %+v, want greet", tools)
	}

	first, err := c.CallTool(ctx, "greet", nil, nil)
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if first.Input == nil {
		t.Fatalf("first call = %+v, want input_required", first)
	}
	el, err := first.Input.InputRequests["who"].Elicitation()
	if err != nil {
		t.Fatal(err)
	}
	if el.Message != "Who are you?" || len(el.RequestedSchema.Properties) != 1 {
		t.Errorf("elicitation = %+v", el)
	}
	second, err := c.CallTool(ctx, "greet", nil, &CallOptions{
		InputResponses: map[string]any{"who": ElicitResult{Action: ActionAccept, Content: map[string]any{"name": "Ada"}}},
		RequestState:   first.Input.RequestState,
	})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if second.Result == nil {
		t.Fatalf("retry = %+v, want a complete result", second)
	}
	if diff := cmp.Diff("Hello, Ada!", second.Result.Text()); diff != "" {
		t.Errorf("text mismatch (-want +got):\n%s", diff)
	}

	// tasks/get is not a method the plain SDK server knows.
	_, err = c.GetTask(ctx, "tsk-1")
	var rpcErr *RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != CodeMethodNotFound || rpcErr.HTTPStatus != 404 {
		t.Errorf("GetTask error = %v, want -32601 on HTTP 404", err)
	}
}
