package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve takes a FILE (TestCommandHelp checks its help says it may be an
// s3:// URL).
func init() { takesFile["serve"] = true }

// TestServe: scctl serve listens on loopback, serves the file's Zarr view,
// and stops cleanly (exit 0) when its context is cancelled, as on SIGINT.
func TestServe(t *testing.T) {
	path := makeFile(t)
	for _, format := range []string{"zarr2", "zarr3"} {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		var errb strings.Builder
		code := make(chan int, 1)
		go func() {
			code <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--format", format, "--token", "tk", path}, pw, &errb)
			pw.Close()
		}()
		line, err := bufio.NewReader(pr).ReadString('\n')
		if err != nil {
			cancel()
			t.Fatalf("%s: no address printed: %v (stderr %s)", format, err, errb.String())
		}
		go io.Copy(io.Discard, pr)
		i := strings.Index(line, "http://")
		if i < 0 {
			cancel()
			t.Fatalf("%s: %q names no URL", format, line)
		}
		url := strings.TrimSpace(line[i:])
		key, chunk := ".zarray", "frames/2.0.0"
		if format == "zarr3" {
			key, chunk = "zarr.json", "frames/c/2/0/0"
		}
		client := &http.Client{Timeout: 10 * time.Second}
		req, _ := http.NewRequest("GET", url+"frames/"+key, nil)
		resp, err := client.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: without the token: %d", format, resp.StatusCode)
		}
		req.Header.Set("Authorization", "Bearer tk")
		resp, err = client.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		var meta map[string]any
		err = json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s: %d %v", format, key, resp.StatusCode, err)
		} else if s, _ := meta["shape"].([]any); len(s) != 3 || s[0] != float64(3) {
			t.Errorf("%s: shape %v, want [3 4 5]", format, meta["shape"])
		}
		resp, err = client.Get(url + chunk + "?token=tk")
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == "" {
			t.Errorf("%s: chunk %s: %d, ETag %q", format, chunk, resp.StatusCode, resp.Header.Get("ETag"))
		}
		cancel()
		select {
		case c := <-code:
			if c != 0 {
				t.Errorf("%s: exit %d after the signal: %s", format, c, errb.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: serve did not stop after its context ended", format)
		}
	}
}

// TestServeRefuses: an address reachable from other machines without a
// token, or a bad format, is a usage error (exit 2) before anything
// listens.
func TestServeRefuses(t *testing.T) {
	path := makeFile(t)
	for _, args := range [][]string{
		{"serve", "--addr", "0.0.0.0:0", path},
		{"serve", "--addr", ":0", path},
		{"serve", "--format", "zarr4", path},
		{"serve", "--refresh", "-1s", path},
		{"serve"},
		{"serve", t.TempDir()},
	} {
		code, _, stderr := runCmd(t, args...)
		if code == 0 {
			t.Errorf("%v: exit 0", args)
		}
		if args[len(args)-1] == path && code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, stderr)
		}
	}
	code, _, stderr := runCmd(t, "serve", "--addr", "0.0.0.0:0", path)
	if !strings.Contains(stderr, "--token") {
		t.Errorf("the refusal does not say what to do: %d %s", code, stderr)
	}
}
