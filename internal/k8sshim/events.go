package k8sshim

import (
	"context"
	"log"
	"net"
	"strings"
	"time"

	eventsapi "github.com/containerd/containerd/api/services/ttrpc/events/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/containerd/ttrpc"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Event topics containerd's task events go under.
const (
	topicCreate      = "/tasks/create"
	topicStart       = "/tasks/start"
	topicExit        = "/tasks/exit"
	topicOOM         = "/tasks/oom"
	topicDelete      = "/tasks/delete"
	topicExecAdded   = "/tasks/exec-added"
	topicExecStarted = "/tasks/exec-started"
)

// publishTimeout bounds one event's delivery to containerd.
const publishTimeout = 5 * time.Second

// maxQueuedEvents bounds the events waiting for containerd; past it the
// oldest are dropped (and logged): the shim never blocks on containerd.
const maxQueuedEvents = 1024

type event struct {
	topic string
	msg   any
}

// publisher forwards events to containerd's ttrpc events service, in
// order, from one goroutine.
type publisher struct {
	address, namespace string
	queue              chan event
}

func newPublisher(ttrpcAddress, namespace string) *publisher {
	p := &publisher{address: strings.TrimPrefix(ttrpcAddress, "unix://"), namespace: namespace, queue: make(chan event, maxQueuedEvents)}
	if p.address != "" {
		go p.run()
	}
	return p
}

func (p *publisher) publish(topic string, msg any) {
	if p.address == "" {
		return
	}
	select {
	case p.queue <- event{topic, msg}:
	default:
		log.Printf("events: queue full, dropped %s", topic)
	}
}

func (p *publisher) run() {
	var client *ttrpc.Client
	for ev := range p.queue {
		for attempt := 0; attempt < 3; attempt++ {
			if client == nil {
				conn, err := net.DialTimeout("unix", p.address, publishTimeout)
				if err != nil {
					log.Printf("events: %s: %v", ev.topic, err)
					time.Sleep(200 * time.Millisecond)
					continue
				}
				client = ttrpc.NewClient(conn)
			}
			if err := p.forward(client, ev); err != nil {
				log.Printf("events: %s: %v", ev.topic, err)
				client.Close()
				client = nil
				continue
			}
			break
		}
	}
}

func (p *publisher) forward(client *ttrpc.Client, ev event) error {
	any, err := typeurl.MarshalAny(ev.msg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	ctx = ttrpc.WithMetadata(ctx, ttrpc.MD{"containerd-namespace-ttrpc": []string{p.namespace}})
	_, err = eventsapi.NewTTRPCEventsClient(client).Forward(ctx, &eventsapi.ForwardRequest{Envelope: &types.Envelope{
		Timestamp: timestamppb.Now(), Namespace: p.namespace, Topic: ev.topic,
		Event: &anypb.Any{TypeUrl: any.GetTypeUrl(), Value: any.GetValue()},
	}})
	return err
}
