package unixhttp

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
)

// A request for any host reaches the server on the socket, and a socket
// that nobody listens on is an error, not a request elsewhere.
func TestClient(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	resp, err := Client(sock).Get("http://docker/containers/json")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || string(body) != "GET /containers/json" {
		t.Errorf("body %q, %v: want the server's answer", body, err)
	}
	if _, err := Client(filepath.Join(t.TempDir(), "none.sock")).Get("http://docker/_ping"); err == nil {
		t.Error("a socket nobody listens on: no error")
	}
}
