// Package unixhttp makes HTTP clients that speak over a unix socket, as
// the Docker API does: cfsprobe's Docker source and the tests' private
// dockerd use it.
package unixhttp

import (
	"context"
	"net"
	"net/http"
)

// Client is an HTTP client that sends every request to the unix socket
// at path, whatever host its URL names (give one, such as
// "http://docker", for the request line).
func Client(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", path)
		},
	}}
}
