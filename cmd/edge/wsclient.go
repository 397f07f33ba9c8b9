package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/coder/websocket"
	"github.com/spf13/pflag"
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

	tick := time.NewTicker(*every)
	defer tick.Stop()
	for _, f := range frames {
		start := time.Now()
		if err := c.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
			return fmt.Errorf("ws: send: %w", err)
		}
		_, echo, err := c.Read(ctx)
		if err != nil {
			return fmt.Errorf("ws: read echo: %w", err)
		}
		if len(echo) > 100 {
			echo = append(echo[:97:97], "..."...)
		}
		fmt.Fprintf(stdout, "echo (%v): %s\n", time.Since(start).Round(10*time.Microsecond), echo)
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
