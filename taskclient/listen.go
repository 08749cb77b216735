package taskclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// ErrStreamEnded is returned by [Stream.Next] when the server closed the
// subscription gracefully (its listen result); the caller listens again to
// go on, and misses nothing: each task's current state comes first.
var ErrStreamEnded = errors.New("the server ended the subscription")

// Stream is an open subscriptions/listen stream of task status
// notifications (notifications/tasks), the push half of the Tasks
// extension. It is not safe for concurrent use.
type Stream struct {
	// TaskIDs are the task IDs the server agreed to push, from its
	// acknowledgement: unknown or foreign IDs are left out.
	TaskIDs []string
	// SubscriptionID is the listen request's id, which every message of
	// the stream carries in _meta.
	SubscriptionID json.RawMessage

	resp *http.Response
	sc   *bufio.Scanner
	id   string
}

// Listen opens a subscriptions/listen stream for the given task IDs and
// returns once the server acknowledged it. The stream lasts until ctx is
// done, Close is called or the server ends it. A server that does not push
// task notifications answers with an error (a *RPCError or *HTTPError);
// callers then poll with GetTask.
func (c *Client) Listen(ctx context.Context, taskIDs []string) (*Stream, error) {
	if taskIDs == nil {
		taskIDs = []string{}
	}
	req, id, err := c.newRequest(ctx, "subscriptions/listen",
		map[string]any{"notifications": map[string]any{"taskIds": taskIDs}}, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("sending subscriptions/listen request: %w", err)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "text/event-stream" || resp.StatusCode >= 300 {
		defer resp.Body.Close()
		_, err := readResponse(resp, id)
		if err == nil {
			err = errors.New("the server answered without a stream")
		}
		return nil, fmt.Errorf("subscriptions/listen: %w", err)
	}
	s := &Stream{resp: resp, id: id, SubscriptionID: json.RawMessage(id)}
	s.sc = bufio.NewScanner(io.LimitReader(resp.Body, 1<<40))
	s.sc.Buffer(make([]byte, 0, 64<<10), maxResponseBytes)
	for {
		msg, err := s.next()
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("subscriptions/listen: waiting for the acknowledgement: %w", err)
		}
		if msg.Method != "notifications/subscriptions/acknowledged" {
			continue
		}
		var p struct {
			Notifications struct {
				TaskIDs []string `json:"taskIds"`
			} `json:"notifications"`
		}
		if err := json.Unmarshal(msg.Params, &p); err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("subscriptions/listen: decoding the acknowledgement: %w", err)
		}
		s.TaskIDs = p.Notifications.TaskIDs
		return s, nil
	}
}

// Next returns the next task status the server pushed. It returns
// ErrStreamEnded when the server ended the subscription, and another error
// when the connection broke or ctx of Listen is done.
func (s *Stream) Next() (*Task, error) {
	for {
		msg, err := s.next()
		if err != nil {
			return nil, err
		}
		switch {
		case msg.Method == "notifications/tasks":
			t, err := decodeTask(msg.Params)
			if err != nil {
				return nil, fmt.Errorf("decoding notifications/tasks: %w", err)
			}
			return t, nil
		case msg.Method == "" && sameID(msg.ID, s.id):
			if msg.Error != nil {
				return nil, msg.Error
			}
			return nil, ErrStreamEnded
		}
	}
}

// Close ends the stream.
func (s *Stream) Close() error { return s.resp.Body.Close() }

// streamMessage is a message of a listen stream.
type streamMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

// next reads the next JSON-RPC message of the event stream.
func (s *Stream) next() (*streamMessage, error) {
	var data []string
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			if len(data) == 0 {
				continue
			}
			var msg streamMessage
			err := json.Unmarshal([]byte(strings.Join(data, "\n")), &msg)
			data = data[:0]
			if err != nil {
				continue // not a JSON-RPC message
			}
			return &msg, nil
		}
		field, value, _ := strings.Cut(line, ":")
		if field == "data" {
			data = append(data, strings.TrimPrefix(value, " "))
		}
	}
	if err := s.sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the stream: %w", err)
	}
	return nil, io.ErrUnexpectedEOF
}
