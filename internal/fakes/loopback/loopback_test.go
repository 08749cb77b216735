package loopback

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestStartServeClose(t *testing.T) {
	var s Server
	addr, err := s.Start("test fake", "", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "hello")
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("address %q, want loopback", addr)
	}
	if _, err := s.Start("test fake", "", http.NotFoundHandler()); err == nil || !strings.Contains(err.Error(), "test fake: already started") {
		t.Errorf("second Start: %v, want an error naming the fake", err)
	}
	resp, err := http.Get("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Errorf("body %q", body)
	}
	if err := s.Close("test fake"); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr); err == nil {
		t.Error("the server still answers after Close")
	}
	if err := s.Close("test fake"); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// It can start again after Close.
	if _, err := s.Start("test fake", "127.0.0.1:0", http.NotFoundHandler()); err != nil {
		t.Fatal(err)
	}
	s.Close("test fake")
}
