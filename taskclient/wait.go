package taskclient

import (
	"context"
	"time"
)

// Wait polls tasks/get for taskID until the task is terminal and returns it.
// The first poll is immediate; later polls wait the interval the last answer
// asked for ([Task.PollInterval]). onUpdate, if not nil, sees every task
// observed, including the terminal one; it runs on Wait's goroutine, so it may
// call [Client.UpdateTask] to answer input requests.
//
// On a tasks/get error or when ctx ends, Wait returns the last task observed
// (nil if none) together with the error.
func Wait(ctx context.Context, c *Client, taskID string, onUpdate func(*Task)) (*Task, error) {
	var last *Task
	for {
		t, err := c.GetTask(ctx, taskID)
		if err != nil {
			return last, err
		}
		last = t
		if onUpdate != nil {
			onUpdate(t)
		}
		if t.Terminal() {
			return t, nil
		}
		timer := time.NewTimer(t.PollInterval())
		select {
		case <-ctx.Done():
			timer.Stop()
			return last, ctx.Err()
		case <-timer.C:
		}
	}
}
