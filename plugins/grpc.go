package plugins

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edge-voice/edge/plugins/internal/pb"
)

// Interface guards: both adapters stay in step with the contract.
var (
	_ Provider          = (*grpcClient)(nil)
	_ SettingsValidator = (*grpcClient)(nil)
	_ pb.ProviderServer = (*grpcServer)(nil)
	_ plugin.GRPCPlugin = (*providerPlugin)(nil)
)

// providerPlugin is the go-plugin glue: it serves impl in a plugin and
// hands edge a client.
type providerPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Provider
}

func (p *providerPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProviderServer(s, &grpcServer{impl: p.impl})
	return nil
}

func (p *providerPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &grpcClient{c: pb.NewProviderClient(c)}, nil
}

// grpcServer runs in the plugin process and calls the implementation.
type grpcServer struct {
	pb.UnimplementedProviderServer
	impl Provider
}

func (s *grpcServer) Describe(ctx context.Context, _ *pb.DescribeRequest) (*pb.Description, error) {
	d, err := s.impl.Describe(ctx)
	if err != nil {
		return nil, err
	}
	out := &pb.Description{Name: d.Name, RendersFallback: d.RendersFallback, MediaHandshakeRetries: int32(max(d.MediaHandshakeRetries, 0))}
	for _, r := range d.Routes {
		out.Routes = append(out.Routes, &pb.Route{Method: r.Method, Path: r.Path})
	}
	out.MediaParams = mediaParamsToPB(d.MediaParams)
	out.ResumeReplay = d.ResumeReplay
	out.MediaHeaders, out.MediaSubprotocols = d.MediaHeaders, d.MediaSubprotocols
	out.ResumeNotice = d.ResumeNotice
	for _, l := range d.LegEvents {
		out.LegEvents = append(out.LegEvents, &pb.LegEvent{Sent: l.Sent, Echo: l.Echo, Name: l.Name})
	}
	return out, nil
}

func (s *grpcServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	c, err := s.impl.Configure(ctx, Settings(req.GetSettings()))
	if err != nil {
		return nil, err
	}
	return &pb.ConfigureResponse{Verifies: c.Verifies, Warnings: c.Warnings}, nil
}

// ValidateSettings answers refused settings as problems, not as an RPC
// error: errors are for the unexpected. A provider without the dry run
// answers Unimplemented, as a plugin built before the RPC existed does.
func (s *grpcServer) ValidateSettings(ctx context.Context, req *pb.ValidateSettingsRequest) (*pb.ValidateSettingsResponse, error) {
	v, ok := s.impl.(SettingsValidator)
	if !ok {
		return nil, status.Errorf(codes.Unimplemented, "provider %T does not implement plugins.SettingsValidator", s.impl)
	}
	c, err := v.ValidateSettings(ctx, Settings(req.GetSettings()))
	if err != nil {
		out := &pb.ValidateSettingsResponse{}
		invalid := InvalidSettings(err)
		if len(invalid) == 0 {
			// A plain error from a provider's parser still refuses the
			// settings: it is what Configure would have returned.
			invalid = []*InvalidSetting{{Reason: err.Error()}}
		}
		for _, e := range invalid {
			out.Problems = append(out.Problems, &pb.SettingProblem{Key: e.Key, Message: e.Reason})
		}
		return out, nil
	}
	return &pb.ValidateSettingsResponse{Verifies: c.Verifies, Warnings: c.Warnings}, nil
}

func (s *grpcServer) Webhook(ctx context.Context, req *pb.WebhookRequest) (*pb.WebhookResponse, error) {
	res, err := s.impl.Webhook(ctx, requestFromPB(req))
	if err != nil {
		return nil, err
	}
	if res == nil || (res.Allocate == nil) == (res.Answer == nil) {
		return nil, errors.New("webhook result must hold exactly one of Allocate and Answer")
	}
	if res.Ended != nil && res.Answer == nil {
		return nil, errors.New("webhook result's Ended comes with an Answer (the acknowledgement), not an allocation")
	}
	return webhookResultToPB(res), nil
}

func (s *grpcServer) Answer(ctx context.Context, req *pb.AnswerRequest) (*pb.HTTPResponse, error) {
	resp, err := s.impl.Answer(ctx, answerReqFromPB(req))
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, errors.New("answer is nil")
	}
	return responseToPB(resp), nil
}

// grpcClient runs in edge and is the Provider the host calls.
type grpcClient struct {
	c pb.ProviderClient
}

func (c *grpcClient) Describe(ctx context.Context) (Description, error) {
	d, err := c.c.Describe(ctx, &pb.DescribeRequest{})
	if err != nil {
		return Description{}, err
	}
	out := Description{Name: d.GetName(), RendersFallback: d.GetRendersFallback(), MediaHandshakeRetries: int(max(d.GetMediaHandshakeRetries(), 0))}
	for _, r := range d.GetRoutes() {
		out.Routes = append(out.Routes, Route{Method: r.GetMethod(), Path: r.GetPath()})
	}
	out.MediaParams = mediaParamsFromPB(d.GetMediaParams())
	out.ResumeReplay = d.GetResumeReplay()
	out.MediaHeaders, out.MediaSubprotocols = d.GetMediaHeaders(), d.GetMediaSubprotocols()
	out.ResumeNotice = d.GetResumeNotice()
	for _, l := range d.GetLegEvents() {
		out.LegEvents = append(out.LegEvents, LegEvent{Sent: l.GetSent(), Echo: l.GetEcho(), Name: l.GetName()})
	}
	return out, nil
}

func (c *grpcClient) Configure(ctx context.Context, s Settings) (Configured, error) {
	r, err := c.c.Configure(ctx, &pb.ConfigureRequest{Settings: s})
	if err != nil {
		return Configured{}, err
	}
	return Configured{Verifies: r.GetVerifies(), Warnings: r.GetWarnings()}, nil
}

// ValidateSettings returns the plugin's problems as joined
// *InvalidSetting, and ErrCannotValidate for a plugin without the RPC.
func (c *grpcClient) ValidateSettings(ctx context.Context, s Settings) (Configured, error) {
	r, err := c.c.ValidateSettings(ctx, &pb.ValidateSettingsRequest{Settings: s})
	if status.Code(err) == codes.Unimplemented {
		return Configured{}, fmt.Errorf("%w: %v", ErrCannotValidate, status.Convert(err).Message())
	}
	if err != nil {
		return Configured{}, err
	}
	if len(r.GetProblems()) > 0 {
		errs := make([]error, 0, len(r.GetProblems()))
		for _, p := range r.GetProblems() {
			errs = append(errs, &InvalidSetting{Key: p.GetKey(), Reason: p.GetMessage()})
		}
		return Configured{}, errors.Join(errs...)
	}
	return Configured{Verifies: r.GetVerifies(), Warnings: r.GetWarnings()}, nil
}

func (c *grpcClient) Webhook(ctx context.Context, req *Request) (*WebhookResult, error) {
	r, err := c.c.Webhook(ctx, requestToPB(req))
	if err != nil {
		return nil, err
	}
	return webhookResultFromPB(r), nil
}

func (c *grpcClient) Answer(ctx context.Context, req *AnswerRequest) (*Response, error) {
	r, err := c.c.Answer(ctx, answerReqToPB(req))
	if err != nil {
		return nil, err
	}
	return responseFromPB(r), nil
}
