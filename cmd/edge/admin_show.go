package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// The text forms of `edge admin`'s answers: tables for lists, "key:
// value" lines for records, the API's message for actions.

func showStatus(w io.Writer, answer []byte) error {
	var a struct {
		Tiers map[string]struct {
			Type      string `json:"type"`
			Assigned  int    `json:"assigned"`
			Available int    `json:"available"`
			Draining  int    `json:"draining"`
			Calls     int    `json:"calls_in_progress"`
			Ejected   int    `json:"ejected"`
			Placement string `json:"placement"`
		} `json:"tiers"`
		ActiveCalls int   `json:"active_calls"`
		IsLeader    *bool `json:"is_leader"`
	}
	if err := json.Unmarshal(answer, &a); err != nil {
		return fmt.Errorf("status answer: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIER\tTYPE\tASSIGNED\tAVAILABLE\tCALLS\tDRAINING\tEJECTED\tPLACEMENT")
	names := make([]string, 0, len(a.Tiers))
	for name := range a.Tiers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t := a.Tiers[name]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", name, t.Type, t.Assigned, t.Available, t.Calls, t.Draining, t.Ejected, dash(t.Placement))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	leads := "unknown"
	if a.IsLeader != nil {
		leads = map[bool]string{true: "yes", false: "no"}[*a.IsLeader]
	}
	_, err := fmt.Fprintf(w, "\nactive calls: %d\nthis replica leads: %s\n", a.ActiveCalls, leads)
	return err
}

func showPods(w io.Writer, answer []byte) error {
	var a struct {
		Pods []struct {
			Name     string   `json:"pod_name"`
			Tier     string   `json:"tier"`
			State    string   `json:"state"`
			Address  string   `json:"address"`
			Calls    []string `json:"calls"`
			Ejection *struct {
				Reason string `json:"reason"`
			} `json:"ejection"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(answer, &a); err != nil {
		return fmt.Errorf("pods answer: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tTIER\tSTATE\tCALLS\tADDRESS")
	for _, p := range a.Pods {
		state := p.State
		if p.Ejection != nil && p.Ejection.Reason != "" {
			state += " (" + p.Ejection.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.Tier, state, dash(strings.Join(p.Calls, ",")), dash(p.Address))
	}
	return tw.Flush()
}

func showCalls(w io.Writer, answer []byte) error {
	var a struct {
		Pod   string   `json:"pod_name"`
		Calls []string `json:"calls"`
	}
	if err := json.Unmarshal(answer, &a); err != nil {
		return fmt.Errorf("calls answer: %w", err)
	}
	if len(a.Calls) == 0 {
		_, err := fmt.Fprintf(w, "pod %s has no live call\n", a.Pod)
		return err
	}
	_, err := fmt.Fprintln(w, strings.Join(a.Calls, "\n"))
	return err
}

// showMessage prints the API's own sentence (drain, undrain).
func showMessage(w io.Writer, answer []byte) error {
	var a struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(answer, &a); err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	_, err := fmt.Fprintln(w, a.Message)
	return err
}

func showRelease(id string) func(io.Writer, []byte) error {
	return func(w io.Writer, answer []byte) error {
		var a struct {
			Message     string `json:"message"`
			Pod         string `json:"pod_name"`
			Pool        string `json:"released_to_pool"`
			Returned    bool   `json:"returned_to_pool"`
			WasDraining bool   `json:"was_draining"`
		}
		if err := json.Unmarshal(answer, &a); err != nil {
			return fmt.Errorf("release answer: %w", err)
		}
		var err error
		switch {
		case a.Message != "":
			_, err = fmt.Fprintf(w, "call %s released: %s\n", id, a.Message)
		case a.Returned:
			_, err = fmt.Fprintf(w, "call %s released: pod %s is back in %s\n", id, a.Pod, a.Pool)
		case a.WasDraining:
			_, err = fmt.Fprintf(w, "call %s released: pod %s is draining and stays out of its pool\n", id, a.Pod)
		default:
			_, err = fmt.Fprintf(w, "call %s released from pod %s\n", id, a.Pod)
		}
		return err
	}
}

// showKeys prints the object under field as "key: value" lines in the
// order the API wrote them (the call's timeline, the running config):
// strings bare, anything else as compact JSON.
func showKeys(field string) func(io.Writer, []byte) error {
	return func(w io.Writer, answer []byte) error {
		var a map[string]json.RawMessage
		if err := json.Unmarshal(answer, &a); err != nil {
			return fmt.Errorf("answer: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(a[field]))
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return fmt.Errorf("answer: no %s object", field)
		}
		var b strings.Builder
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return fmt.Errorf("answer: %w", err)
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return fmt.Errorf("answer: %w", err)
			}
			var s string
			if json.Unmarshal(v, &s) != nil {
				var c bytes.Buffer
				json.Compact(&c, v)
				s = c.String()
			}
			fmt.Fprintf(&b, "%s: %s\n", k, s)
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
