package twilio

import (
	"encoding/xml"
	"net/http"

	"github.com/edge-voice/edge/plugins"
)

// TwiML documents, encoded with encoding/xml so every value is escaped.

type twimlConnect struct {
	XMLName xml.Name    `xml:"Response"`
	Stream  twimlStream `xml:"Connect>Stream"`
}

type twimlStream struct {
	URL string `xml:"url,attr"`
	// StatusCallback gets the stream's stream-started, stream-stopped and
	// stream-error events; omitted without a webhook base.
	StatusCallback       string           `xml:"statusCallback,attr,omitempty"`
	StatusCallbackMethod string           `xml:"statusCallbackMethod,attr,omitempty"`
	Params               []twimlParameter `xml:"Parameter"`
}

type twimlParameter struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type twimlSayHangup struct {
	XMLName xml.Name  `xml:"Response"`
	Say     string    `xml:"Say"`
	Hangup  *struct{} `xml:"Hangup"`
}

// connectAnswer is <Response><Connect><Stream url=...> with <Parameter>s.
// Twilio drops query strings from Stream URLs, so everything the media
// side needs rides in Parameters (delivered in the stream's start message).
// With a callback base the stream's events go to its status route, so that
// a stream that never opens or stops ends the call at once.
func connectAnswer(req plugins.AllocationRequest, a plugins.Allocation, callbackBase string) (*plugins.Response, error) {
	params := []twimlParameter{
		{"call_sid", a.CallID},
		{"pod_name", a.PodName},
	}
	if req.MerchantID != "" {
		params = append(params, twimlParameter{"merchant_id", req.MerchantID})
	}
	stream := twimlStream{URL: a.WSURL, Params: params}
	if callbackBase != "" {
		stream.StatusCallback, stream.StatusCallbackMethod = callbackBase+"/"+RouteStatus, http.MethodPost
	}
	resp, err := plugins.XMLAnswer(http.StatusOK, twimlConnect{Stream: stream})
	if err != nil {
		return nil, err
	}
	resp.ContentType = "text/xml"
	return resp, nil
}

// sayHangupAnswer speaks msg and hangs up.
func sayHangupAnswer(status int, msg string) (*plugins.Response, error) {
	resp, err := plugins.XMLAnswer(status, twimlSayHangup{Say: msg, Hangup: &struct{}{}})
	if err != nil {
		return nil, err
	}
	resp.ContentType = "text/xml"
	return resp, nil
}
