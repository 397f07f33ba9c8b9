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
// track Telnyx sends, and bidirectionalMode so that the agent can speak
// back on the same socket.
type texmlStream struct {
	URL               string `xml:"url,attr"`
	Track             string `xml:"track,attr,omitempty"`
	BidirectionalMode string `xml:"bidirectionalMode,attr,omitempty"`
}

type texmlSayHangup struct {
	XMLName xml.Name  `xml:"Response"`
	Say     string    `xml:"Say"`
	Hangup  *struct{} `xml:"Hangup"`
}

// streamAnswer is <Response><Connect><Stream url=...>: <Connect> holds
// the call on the stream until the socket closes. The media URL carries
// the call in its token, so no <Parameter> is needed.
func streamAnswer(s *settings, a plugins.Allocation) (*plugins.Response, error) {
	return texml(http.StatusOK, texmlConnect{Stream: texmlStream{URL: a.WSURL, Track: s.track, BidirectionalMode: s.bidirectional}})
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
