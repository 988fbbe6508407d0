package dtel

import (
	"errors"
	"strconv"
	"strings"

	"github.com/intd-project/intd/sai"
)

// attrPaths maps sai attribute names (AttrError.Attr, longest prefix
// first) to the configuration leaf they come from, relative to the
// object's path.
var attrPaths = map[sai.ObjectType][][2]string{
	sai.ObjectTypeDTel: {
		{"IntEndpointEnable", "/node/config/int-endpoint"},
		{"IntTransitEnable", "/node/config/int-transit"},
		{"PostcardEnable", "/node/config/postcard"},
		{"DropReportEnable", "/node/config/drop-report"},
		{"QueueReportEnable", "/node/config/queue-report"},
		{"SwitchID", "/node/config/node-id"},
		{"FlowStateClearCycle", "/node/config/flow-state-clear-cycle"},
		{"LatencySensitivity", "/node/config/latency-sensitivity"},
		{"SinkPortList", "/interfaces"},
		{"IntL4DSCPRemark", "/marking/config/remark-dscp"},
		{"IntL4DSCP", "/marking/config/dscp-value"},
		{"MalformedAction", "/node/config/malformed-int-action"},
		{"IntUDPDstPort", "/marking/config/udp-port"},
		{"IntUDPNPT", "/marking/config/udp-npt"},
		{"ProbeMarker", "/marking/config/probe-marker"},
		{"VXLANGPENextProtocol", "/marking/config/vxlan-gpe-next-protocol"},
		{"GeneveOptionClass", "/marking/config/geneve-option-class"},
		{"GREProtocolType", "/marking/config/gre-protocol-type"},
		{"FlowReport.Interval", "/flow-report-filter/config/report-interval"},
		{"FlowReport.HopLatencyChange", "/flow-report-filter/config/hop-latency-threshold"},
		{"FlowReport", "/flow-report-filter/config"},
	},
	sai.ObjectTypeIntSession: {
		{"Mode", "/config/mode"},
		{"MaxHopCount", "/config/remaining-hop-count"},
		{"Instructions", "/config/instructions"},
		{"DomainSpecificID", "/config/domain-specific-id"},
		{"DSInstruction", "/config/ds-instruction"},
		{"DSFlags", "/config/ds-flags"},
		{"Discard", "/config/discard"},
		{"ClampTCPMSS", "/config/clamp-tcp-mss"},
	},
	sai.ObjectTypeReportSession: {
		{"SrcIP", "/config/source-address"},
		{"Destinations", "/collectors"},
		{"VirtualRouter", "/config/vrf"},
		{"TruncateSize", "/config/truncate-size"},
		{"UDPDstPort", "/collectors"},
		{"Format", "/config/report-format"},
		{"DSCP", "/config/dscp"},
		{"Coalesce.MaxReports", "/config/max-reports-per-packet"},
		{"Coalesce.MaxDelay", "/config/max-delay"},
		{"RateLimit", "/config/rate-limit"},
	},
	sai.ObjectTypeQueueReport: {
		{"Port", "/config/interface"},
		{"Queue", "/config/queue-id"},
		{"DepthThreshold", "/config/depth-threshold"},
		{"LatencyThreshold", "/config/latency-threshold"},
		{"ResetThreshold", "/config/latency-reset-threshold"},
		{"BreachQuota", "/config/breach-quota"},
		{"TailDrop", "/config/tail-drop"},
		{"", "/config"}, // the queue report as a whole
	},
	sai.ObjectTypeEvent: {
		{"Type", "/config/type"},
		{"ReportSession", "/config/report-session"},
		{"DSCP", "/config/dscp"},
	},
	sai.ObjectTypeWatchlistEntry: {
		{"Priority", "/config/sequence-id"},
		{"Match.SrcPrefix", "/match/config/source-prefix"},
		{"Match.DstPrefix", "/match/config/destination-prefix"},
		{"Match.IPProtocol", "/match/config/protocol"},
		{"Match.L4SrcPort", "/match/config/source-port-min"},
		{"Match.L4DstPort", "/match/config/destination-port-min"},
		{"Match.DSCP", "/match/config/dscp"},
		{"Match.TCPFlags", "/match/config/tcp-flags"},
		{"Match.InPort", "/match/config/ingress-interface"},
		{"Match.Inner.VXLAN", "/vxlan-match/config"},
		{"Match.Inner.VNI", "/vxlan-match/config/vni"},
		{"Match.Inner.SrcPrefix", "/vxlan-match/config/inner-source-prefix"},
		{"Match.Inner.DstPrefix", "/vxlan-match/config/inner-destination-prefix"},
		{"Match.Inner.IPProtocol", "/vxlan-match/config/inner-protocol"},
		{"Match.Inner.L4SrcPort", "/vxlan-match/config/inner-source-port-min"},
		{"Match.Inner.L4DstPort", "/vxlan-match/config/inner-destination-port-min"},
		{"Match", "/match/config"},
		{"Action.FlowOp", "/actions/config/flow-op"},
		{"Action.IntSession", "/actions/config/int-session"},
		{"Action.DropReportEnable", "/actions/config/drop-report"},
		{"Action.TailDropReportEnable", "/actions/config/tail-drop-report"},
		{"Action.FlowSamplePercent", "/actions/config/sample-percent"},
		{"Action.ReportAllPackets", "/actions/config/report-all-packets"},
		{"Action.PacketInterval", "/actions/config/packet-interval"},
	},
}

// attrError turns a sai validation or capability error about obj into an
// *InvalidError naming the configuration leaf.
func (o *Orchestrator) attrError(obj *object, err error) error {
	path := obj.path
	msg := err.Error()
	var ae *sai.AttrError
	if errors.As(err, &ae) {
		msg = ae.Msg
		if errors.Is(err, sai.ErrUnsupported) {
			msg += " by the dataplane"
		}
		path += subPath(obj, ae.Attr)
	}
	return &InvalidError{Path: path, Msg: msg, Err: err}
}

func subPath(obj *object, attr string) string {
	best, _ := attrLeaf(obj.key.t, attr)
	// Name list entries for indexed attributes.
	if i, ok := attrIndex(attr); ok {
		switch a := obj.attrs.(type) {
		case sai.DTelAttrs:
			if strings.HasPrefix(attr, "SinkPortList[") && i < len(a.SinkPortList) {
				return "/interfaces/interface[name=" + a.SinkPortList[i] + "]/config/int-sink"
			}
		case sai.ReportSessionAttrs:
			if strings.HasPrefix(attr, "Destinations[") && i < len(a.Destinations) {
				d := a.Destinations[i]
				return "/collectors/collector[address=" + d.IP.String() + "][port=" + strconv.Itoa(int(d.UDPPort)) + "]/config"
			}
		}
	}
	return best
}

// attrLeaf returns the path of the longest entry of attrPaths that attr
// starts with.
func attrLeaf(t sai.ObjectType, attr string) (string, bool) {
	best, bestLen := "", -1
	for _, m := range attrPaths[t] {
		if strings.HasPrefix(attr, m[0]) && len(m[0]) > bestLen {
			best, bestLen = m[1], len(m[0])
		}
	}
	return best, bestLen >= 0
}

func attrIndex(attr string) (int, bool) {
	i := strings.IndexByte(attr, '[')
	j := strings.IndexByte(attr, ']')
	if i < 0 || j < i {
		return 0, false
	}
	n, err := strconv.Atoi(attr[i+1 : j])
	return n, err == nil
}
