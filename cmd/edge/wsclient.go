package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/coder/websocket"
	"github.com/spf13/pflag"

	"github.com/edge-voice/edge/internal/fakeagent"
)

func init() { subcommands["ws"] = wsClient }

// wsClient is `edge ws <ws_url>`: a tiny media client for trying the whole
// call by hand. It opens the media URL an allocation answered, plays a
// provider (Twilio's connected, start, media and stop events), prints what
// the pod echoes, and closes the socket, which releases the call.
func wsClient(ctx context.Context, args, _ []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("edge ws", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.IntP("frames", "n", 5, "media frames to send")
	every := fs.Duration("interval", 20*time.Millisecond, "time between media frames (Twilio sends one per 20ms)")
	crash := fs.Int("crash-pod-after", 0, "after this many media frames, tell edge's built-in fake agent to drop the socket as a crashed pod does (no close frame): with proxy.resume the call moves to another pod and the echoes go on")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: edge ws [flags] <ws_url>\n\nOpens a media WebSocket, sends Twilio-like frames and prints the echoes.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("ws: want exactly one URL")
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(dctx, fs.Arg(0), nil)
	if err != nil {
		if resp != nil {
			return fmt.Errorf("ws: open %s: %s", fs.Arg(0), resp.Status)
		}
		return fmt.Errorf("ws: open %s: %w", fs.Arg(0), err)
	}
	defer c.CloseNow()
	fmt.Fprintln(stdout, "connected:", fs.Arg(0))

	frames := []string{`{"event":"connected","protocol":"Call","version":"1.0.0"}`,
		`{"event":"start","sequenceNumber":"1","start":{"streamSid":"MZdemo","callSid":"CAdemo","mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}},"streamSid":"MZdemo"}`}
	audio := base64.StdEncoding.EncodeToString(make([]byte, 160)) // 20ms of 8kHz mu-law
	for i := range *n {
		frames = append(frames, fmt.Sprintf(`{"event":"media","sequenceNumber":"%d","media":{"track":"inbound","chunk":"%d","timestamp":"%d","payload":"%s"},"streamSid":"MZdemo"}`, i+2, i+1, i*20, audio))
	}
	frames = append(frames, fmt.Sprintf(`{"event":"stop","sequenceNumber":"%d","streamSid":"MZdemo"}`, *n+2))

	echoes := make(chan []byte, 16)
	readErr := make(chan error, 1)
	go func() {
		for {
			_, echo, err := c.Read(ctx)
			if err != nil {
				readErr <- err
				return
			}
			echoes <- echo
		}
	}()
	tick := time.NewTicker(*every)
	defer tick.Stop()
	crashed := false
	for i, f := range frames {
		if *crash > 0 && i == *crash+2 {
			if err := c.Write(ctx, websocket.MessageText, []byte(fakeagent.CloseMessage+"0")); err != nil {
				return fmt.Errorf("ws: send: %w", ended(readErr, err))
			}
			fmt.Fprintln(stdout, "pod crashed: the fake agent dropped the socket without a close frame")
			crashed = true
		}
		start := time.Now()
		if err := c.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
			return fmt.Errorf("ws: send: %w", ended(readErr, err))
		}
		if err := awaitEcho(ctx, echoes, readErr, start, crashed, stdout); err != nil {
			return fmt.Errorf("ws: read echo: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	if err := c.Close(websocket.StatusNormalClosure, "stream stopped"); err != nil {
		return fmt.Errorf("ws: close: %w", err)
	}
	fmt.Fprintln(stdout, "closed: the call is released")
	return nil
}

// echoWait bounds the wait for one echo after a crash: a frame written
// into the dead pod's socket before edge saw it die is lost with it.
const echoWait = time.Second

// awaitEcho prints the echo of the frame sent at start. After a crash,
// edge tells the provider to clear the dead pod's queued audio, and the
// pod the call moved to echoes the stream's opening that edge gave it
// again first: those are shown as such.
func awaitEcho(ctx context.Context, echoes <-chan []byte, readErr <-chan error, start time.Time, crashed bool, stdout io.Writer) error {
	var timeout <-chan time.Time
	if crashed {
		t := time.NewTimer(echoWait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			return err
		case <-timeout:
			fmt.Fprintln(stdout, "no echo: the frame went to the crashed pod before edge saw it die")
			return nil
		case echo := <-echoes:
			var m struct {
				Event string `json:"event"`
			}
			if crashed && json.Unmarshal(echo, &m) == nil && (m.Event == "connected" || m.Event == "start") {
				fmt.Fprintf(stdout, "another pod took the call: edge gave it the stream's %q again\n", m.Event)
				continue
			}
			if crashed && m.Event == "clear" {
				fmt.Fprintf(stdout, "edge told the provider to drop the dead pod's queued audio: %s\n", echo)
				continue
			}
			if len(echo) > 100 {
				echo = append(echo[:97:97], "..."...)
			}
			fmt.Fprintf(stdout, "echo (%v): %s\n", time.Since(start).Round(10*time.Microsecond), echo)
			return nil
		}
	}
}

// ended is why a write failed: the socket's end as its reader saw it (a
// close frame and its code), when the reader saw one, else err.
func ended(readErr <-chan error, err error) error {
	select {
	case rerr := <-readErr:
		return rerr
	case <-time.After(100 * time.Millisecond):
		return err
	}
}
