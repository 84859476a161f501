package report

// A real browser loads the HTML report from disk: Chromium, headless and
// offline, driven through the DevTools protocol over
// --remote-debugging-pipe (the transport Puppeteer's pipe mode uses:
// NUL-terminated JSON messages on file descriptors 3 and 4). The pipe
// needs no WebSocket, no port and no Go module beyond the standard
// library, and every console message, exception and network request of
// the page reaches the test as a protocol event.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
)

// chromiumPaths are where Debian and others install Chromium; CHROMIUM
// overrides them.
var chromiumPaths = []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}

// needChromium returns the browser's path, or skips the test (fails it
// under CFSPROBE_REQUIRE_CGROUPS=1, as CI runs) when there is none.
func needChromium(t testing.TB) string {
	t.Helper()
	cands := chromiumPaths
	if p := os.Getenv("CHROMIUM"); p != "" {
		cands = []string{p}
	}
	for _, p := range cands {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if testenv.Required() {
		t.Fatalf("%s=1 but Chromium is not installed (apt-get install chromium, or make deps)", testenv.RequireEnv)
	}
	t.Skipf("Chromium not installed (apt-get install chromium); set %s=1 to make this a failure", testenv.RequireEnv)
	return ""
}

// cdpMsg is one DevTools protocol message: a command, its response, or an
// event.
type cdpMsg struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// browser is a headless Chromium with a DevTools pipe.
type browser struct {
	cmd    *exec.Cmd
	out    *os.File // our end of the browser's fd 3 (commands)
	stderr bytes.Buffer

	mu      sync.Mutex
	nextID  int
	pending map[int]chan cdpMsg
	events  []cdpMsg
	changed chan struct{} // closed and replaced when an event arrives
	readErr error
}

// startBrowser launches Chromium offline: no first-run, no background
// networking, updates, sync or QUIC, every host name unresolvable, and a
// new empty profile.
func startBrowser(t testing.TB, path string) *browser {
	t.Helper()
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{pending: map[int]chan cdpMsg{}, changed: make(chan struct{}), out: cmdW}
	b.cmd = exec.Command(path,
		"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
		"--disable-default-apps", "--disable-extensions", "--no-default-browser-check", "--mute-audio",
		`--host-resolver-rules=MAP * ~NOTFOUND`,
		"--hide-scrollbars", "--user-data-dir="+t.TempDir(),
		"--remote-debugging-pipe", "about:blank")
	b.cmd.ExtraFiles = []*os.File{cmdR, resW} // fd 3: commands in, fd 4: messages out
	b.cmd.Stderr = &b.stderr
	if err := tied.Start(b.cmd); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	cmdR.Close()
	resW.Close()
	go b.read(resR)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.call(ctx, "", "Browser.close", nil) //nolint:errcheck // killed below if it did not close
		done := make(chan struct{})
		go func() { b.cmd.Wait(); close(done) }() //nolint:errcheck
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			b.cmd.Process.Kill() //nolint:errcheck
			<-done
		}
		cmdW.Close()
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", lastLines(b.stderr.String(), 30))
		}
	})
	return b
}

// lastLines is the end of Chromium's log, without its complaints about
// the D-Bus a headless machine does not have.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if !strings.Contains(l, "dbus") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// read dispatches the browser's messages: responses to their callers,
// events to the log.
func (b *browser) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			close(b.changed)
			b.changed = make(chan struct{})
			b.mu.Unlock()
			return
		}
		var m cdpMsg
		if err := json.Unmarshal(raw[:len(raw)-1], &m); err != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				ch <- m
				delete(b.pending, m.ID)
			}
		} else {
			b.events = append(b.events, m)
			close(b.changed)
			b.changed = make(chan struct{})
		}
		b.mu.Unlock()
	}
}

// call sends a command (to the browser, or to a page's session) and
// returns its result.
func (b *browser) call(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	if params == nil {
		params = struct{}{}
	}
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	ch := make(chan cdpMsg, 1)
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return nil, fmt.Errorf("%s: browser gone: %w", method, b.readErr)
	}
	b.nextID++
	id := b.nextID
	b.pending[id] = ch
	b.mu.Unlock()
	msg, err := json.Marshal(cdpMsg{ID: id, Method: method, Params: p, SessionID: session})
	if err != nil {
		return nil, err
	}
	if _, err := b.out.Write(append(msg, 0)); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%s: browser closed the pipe", method)
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		return m.Result, nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// waitEvent waits for an event of the session.
func (b *browser) waitEvent(ctx context.Context, session, method string) (cdpMsg, error) {
	seen := 0
	for {
		b.mu.Lock()
		evs, changed, rerr := b.events, b.changed, b.readErr
		b.mu.Unlock()
		for _, e := range evs[seen:] {
			if e.Method == method && e.SessionID == session {
				return e, nil
			}
		}
		seen = len(evs)
		if rerr != nil {
			return cdpMsg{}, fmt.Errorf("waiting for %s: browser gone: %w", method, rerr)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return cdpMsg{}, fmt.Errorf("waiting for %s: %w", method, ctx.Err())
		}
	}
}

// Events returns the events received so far.
func (b *browser) Events() []cdpMsg {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]cdpMsg(nil), b.events...)
}

// page is one tab, attached with its own session.
type page struct {
	b       *browser
	session string
}

// openPage creates a tab of the given size, turns on the domains whose
// events the tests watch (console, exceptions, log, network), and loads
// url, waiting for its load event.
func (b *browser) openPage(ctx context.Context, url string, width, height int) (*page, error) {
	res, err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"})
	if err != nil {
		return nil, err
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := json.Unmarshal(res, &target); err != nil {
		return nil, err
	}
	res, err = b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true})
	if err != nil {
		return nil, err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &att); err != nil {
		return nil, err
	}
	p := &page{b: b, session: att.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable", "Network.enable"} {
		if _, err := p.call(ctx, m, nil); err != nil {
			return nil, err
		}
	}
	if _, err := p.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false,
	}); err != nil {
		return nil, err
	}
	if _, err := p.call(ctx, "Page.navigate", map[string]any{"url": url}); err != nil {
		return nil, err
	}
	if _, err := b.waitEvent(ctx, p.session, "Page.loadEventFired"); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *page) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return p.b.call(ctx, p.session, method, params)
}

// eval runs a JavaScript expression in the page and decodes its value
// (JSON-serialisable) into v.
func (p *page) eval(ctx context.Context, expr string, v any) error {
	res, err := p.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true})
	if err != nil {
		return err
	}
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("evaluate %q: %s %s", expr, e.Text, e.Exception.Description)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(r.Result.Value, v)
}

// problems lists what the page did wrong so far: console errors and
// failed assertions, uncaught exceptions, error log entries, and any
// network request for something other than the report file itself.
func (p *page) problems(fileURL string) (errs []string, requests []string) {
	for _, e := range p.b.Events() {
		if e.SessionID != p.session {
			continue
		}
		switch e.Method {
		case "Runtime.consoleAPICalled":
			var c struct {
				Type string `json:"type"`
				Args []struct {
					Value       any    `json:"value"`
					Description string `json:"description"`
				} `json:"args"`
			}
			json.Unmarshal(e.Params, &c) //nolint:errcheck
			if c.Type == "error" || c.Type == "assert" || c.Type == "warning" {
				var parts []string
				for _, a := range c.Args {
					parts = append(parts, fmt.Sprint(a.Value, a.Description))
				}
				errs = append(errs, "console."+c.Type+": "+strings.Join(parts, " "))
			}
		case "Runtime.exceptionThrown":
			errs = append(errs, "exception: "+string(e.Params))
		case "Log.entryAdded":
			var l struct {
				Entry struct {
					Level  string `json:"level"`
					Source string `json:"source"`
					Text   string `json:"text"`
					URL    string `json:"url"`
				} `json:"entry"`
			}
			json.Unmarshal(e.Params, &l) //nolint:errcheck
			if l.Entry.Level == "error" || l.Entry.Level == "warning" {
				errs = append(errs, fmt.Sprintf("log %s (%s): %s %s", l.Entry.Level, l.Entry.Source, l.Entry.Text, l.Entry.URL))
			}
		case "Network.requestWillBeSent":
			var r struct {
				Request struct {
					URL string `json:"url"`
				} `json:"request"`
			}
			json.Unmarshal(e.Params, &r) //nolint:errcheck
			if r.Request.URL != fileURL {
				requests = append(requests, r.Request.URL)
			}
		case "Network.loadingFailed":
			errs = append(errs, "loading failed: "+string(e.Params))
		}
	}
	return errs, requests
}

// screenshot captures the whole page, beyond the viewport, as PNG.
func (p *page) screenshot(ctx context.Context, width int) ([]byte, error) {
	res, err := p.call(ctx, "Page.getLayoutMetrics", nil)
	if err != nil {
		return nil, err
	}
	var lm struct {
		CSSContentSize struct {
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	if err := json.Unmarshal(res, &lm); err != nil {
		return nil, err
	}
	if lm.CSSContentSize.Height <= 0 {
		return nil, errors.New("page has no height")
	}
	res, err = p.call(ctx, "Page.captureScreenshot", map[string]any{
		"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": width, "height": lm.CSSContentSize.Height, "scale": 1},
	})
	if err != nil {
		return nil, err
	}
	var shot struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(res, &shot); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(shot.Data)
}
