package telnyx

import (
	"encoding/xml"
	"net/http"

	"github.com/edge-voice/edge/plugins"
)

// TeXML documents, encoded with encoding/xml so every value is escaped.

type texmlConnect struct {
	XMLName xml.Name    `xml:"Response"`
	Stream  texmlStream `xml:"Connect>Stream"`
}

// texmlStream is TeXML's <Stream> (Telnyx's TeXML reference): url, the
// track Telnyx sends, bidirectionalMode so that the agent can speak back
// on the same socket, and the status callback that tells edge when the
// stream stopped or failed.
type texmlStream struct {
	URL                  string `xml:"url,attr"`
	Track                string `xml:"track,attr,omitempty"`
	BidirectionalMode    string `xml:"bidirectionalMode,attr,omitempty"`
	StatusCallback       string `xml:"statusCallback,attr,omitempty"`
	StatusCallbackMethod string `xml:"statusCallbackMethod,attr,omitempty"`
}

type texmlSayHangup struct {
	XMLName xml.Name  `xml:"Response"`
	Say     string    `xml:"Say"`
	Hangup  *struct{} `xml:"Hangup"`
}

// streamAnswer is <Response><Connect><Stream url=...>: <Connect> holds
// the call on the stream until the socket closes. The media URL carries
// the call in its token, so no <Parameter> is needed. With a callback
// base (edge knows its public webhook URL) the stream's status callbacks
// come to RouteStatus; without one none is named.
func streamAnswer(s *settings, a plugins.Allocation, callbackBase string) (*plugins.Response, error) {
	st := texmlStream{URL: a.WSURL, Track: s.track, BidirectionalMode: s.bidirectional}
	if callbackBase != "" {
		st.StatusCallback, st.StatusCallbackMethod = callbackBase+"/"+RouteStatus, http.MethodPost
	}
	return texml(http.StatusOK, texmlConnect{Stream: st})
}

// sayHangupAnswer speaks msg and hangs up.
func sayHangupAnswer(status int, msg string) (*plugins.Response, error) {
	return texml(status, texmlSayHangup{Say: msg, Hangup: &struct{}{}})
}

func texml(status int, doc any) (*plugins.Response, error) {
	resp, err := plugins.XMLAnswer(status, doc)
	if err != nil {
		return nil, err
	}
	resp.ContentType = "text/xml"
	return resp, nil
}
