package sai

import "strings"

// AttrID names one attribute of one object type, as SAI's
// SAI_<OBJECT>_ATTR_* ids do (with sub-attributes where a rule checks one
// part of a value). Errors carry it, so callers map an error back to where
// the value came from without knowing sai's Go field names.
type AttrID uint8

// Attribute ids, grouped by object type.
const (
	// AttrNone: the object as a whole.
	AttrNone AttrID = iota

	// DTel
	AttrDTelIntEndpointEnable
	AttrDTelIntTransitEnable
	AttrDTelPostcardEnable
	AttrDTelDropReportEnable
	AttrDTelQueueReportEnable
	AttrDTelSwitchID
	AttrDTelFlowStateClearCycle
	AttrDTelLatencySensitivity
	AttrDTelSinkPortList
	AttrDTelIntL4DSCP
	AttrDTelIntL4DSCPValue
	AttrDTelIntL4DSCPMask
	AttrDTelIntL4DSCPRemark
	AttrDTelMalformedAction
	AttrDTelIntUDPDstPort
	AttrDTelIntUDPNPT
	AttrDTelProbeMarker
	AttrDTelVXLANGPENextProtocol
	AttrDTelGeneveOptionClass
	AttrDTelGREProtocolType
	AttrDTelFlowReportInterval
	AttrDTelFlowReportHopLatencyChange
	AttrDTelFlowReportOnPortChange
	AttrDTelFlowReportOnPathChange
	AttrDTelFlowReportOnQueueChange
	AttrDTelDSValues
	AttrDTelFlowReportAdaptive
	AttrDTelFlowReportLatencyFactor
	AttrDTelFlowReportLatencyFloor
	AttrDTelHWID
	AttrDTelTunnelAddress
	AttrDTelTunnelAddress6

	// IntSession
	AttrIntSessionMode
	AttrIntSessionMaxHopCount
	AttrIntSessionInstructions
	AttrIntSessionDomainSpecificID
	AttrIntSessionDSInstruction
	AttrIntSessionDSFlags
	AttrIntSessionDiscard
	AttrIntSessionClampTCPMSS
	AttrIntSessionEncapsulation
	AttrIntSessionTunnelDestination
	AttrIntSessionTunnelDestination6

	// ReportSession
	AttrReportSessionSrcIP
	AttrReportSessionDestinations
	AttrReportSessionDestinationIP
	AttrReportSessionDestinationUDPPort
	AttrReportSessionVirtualRouter
	AttrReportSessionTruncateSize
	AttrReportSessionUDPDstPort
	AttrReportSessionFormat
	AttrReportSessionDSCP
	AttrReportSessionCoalesceMaxReports
	AttrReportSessionCoalesceMaxDelay
	AttrReportSessionRateLimit
	AttrReportSessionDistributeByFlow
	AttrReportSessionMTU
	AttrReportSessionSrcPortMode
	AttrReportSessionSrcPort
	AttrReportSessionSrcPortMin
	AttrReportSessionSrcPortMax

	// QueueReport
	AttrQueueReportPort
	AttrQueueReportQueue
	AttrQueueReportDepthThreshold
	AttrQueueReportLatencyThreshold
	AttrQueueReportResetThreshold
	AttrQueueReportBreachQuota
	AttrQueueReportTailDrop
	AttrQueueReportRateLimit

	// Event
	AttrEventType
	AttrEventReportSession
	AttrEventDSCP

	// Watchlist entry
	AttrWatchlistPriority
	AttrWatchlistMatchSrcPrefix
	AttrWatchlistMatchDstPrefix
	AttrWatchlistMatchIPProtocol
	AttrWatchlistMatchL4SrcPort
	AttrWatchlistMatchL4DstPort
	AttrWatchlistMatchDSCPValue
	AttrWatchlistMatchDSCPMask
	AttrWatchlistMatchTCPFlagsValue
	AttrWatchlistMatchTCPFlagsMask
	AttrWatchlistMatchInPort
	AttrWatchlistMatchEtherType
	AttrWatchlistMatchICMPType
	AttrWatchlistMatchICMPTypeMask
	AttrWatchlistMatchICMPCode
	AttrWatchlistMatchICMPCodeMask
	AttrWatchlistMatchInnerEnabled
	AttrWatchlistMatchInnerTunnel
	AttrWatchlistMatchInnerTunnelID
	AttrWatchlistMatchInnerEtherType
	AttrWatchlistMatchInnerSrcPrefix
	AttrWatchlistMatchInnerDstPrefix
	AttrWatchlistMatchInnerIPProtocol
	AttrWatchlistMatchInnerL4SrcPort
	AttrWatchlistMatchInnerL4DstPort
	AttrWatchlistActionFlowOp
	AttrWatchlistActionIntSession
	AttrWatchlistActionDropReportEnable
	AttrWatchlistActionTailDropReportEnable
	AttrWatchlistActionFlowSamplePercent
	AttrWatchlistActionReportAllPackets
	AttrWatchlistActionPacketInterval

	attrCount
)

// attrInfo is an attribute's object type and its Go field path in the
// object's Attrs type; "[]" marks a list, where errors name an entry.
var attrInfo = [attrCount]struct {
	object ObjectType
	field  string
}{
	AttrDTelIntEndpointEnable:               {ObjectTypeDTel, "IntEndpointEnable"},
	AttrDTelIntTransitEnable:                {ObjectTypeDTel, "IntTransitEnable"},
	AttrDTelPostcardEnable:                  {ObjectTypeDTel, "PostcardEnable"},
	AttrDTelDropReportEnable:                {ObjectTypeDTel, "DropReportEnable"},
	AttrDTelQueueReportEnable:               {ObjectTypeDTel, "QueueReportEnable"},
	AttrDTelSwitchID:                        {ObjectTypeDTel, "SwitchID"},
	AttrDTelFlowStateClearCycle:             {ObjectTypeDTel, "FlowStateClearCycle"},
	AttrDTelLatencySensitivity:              {ObjectTypeDTel, "LatencySensitivity"},
	AttrDTelSinkPortList:                    {ObjectTypeDTel, "SinkPortList[]"},
	AttrDTelIntL4DSCP:                       {ObjectTypeDTel, "IntL4DSCP"},
	AttrDTelIntL4DSCPValue:                  {ObjectTypeDTel, "IntL4DSCP.Value"},
	AttrDTelIntL4DSCPMask:                   {ObjectTypeDTel, "IntL4DSCP.Mask"},
	AttrDTelIntL4DSCPRemark:                 {ObjectTypeDTel, "IntL4DSCPRemark"},
	AttrDTelMalformedAction:                 {ObjectTypeDTel, "MalformedAction"},
	AttrDTelIntUDPDstPort:                   {ObjectTypeDTel, "IntUDPDstPort"},
	AttrDTelIntUDPNPT:                       {ObjectTypeDTel, "IntUDPNPT"},
	AttrDTelProbeMarker:                     {ObjectTypeDTel, "ProbeMarker"},
	AttrDTelVXLANGPENextProtocol:            {ObjectTypeDTel, "VXLANGPENextProtocol"},
	AttrDTelGeneveOptionClass:               {ObjectTypeDTel, "GeneveOptionClass"},
	AttrDTelGREProtocolType:                 {ObjectTypeDTel, "GREProtocolType"},
	AttrDTelFlowReportInterval:              {ObjectTypeDTel, "FlowReport.Interval"},
	AttrDTelFlowReportHopLatencyChange:      {ObjectTypeDTel, "FlowReport.HopLatencyChange"},
	AttrDTelFlowReportOnPortChange:          {ObjectTypeDTel, "FlowReport.OnPortChange"},
	AttrDTelFlowReportOnPathChange:          {ObjectTypeDTel, "FlowReport.OnPathChange"},
	AttrDTelFlowReportOnQueueChange:         {ObjectTypeDTel, "FlowReport.OnQueueChange"},
	AttrDTelDSValues:                        {ObjectTypeDTel, "DSValues[]"},
	AttrDTelFlowReportAdaptive:              {ObjectTypeDTel, "FlowReport.Adaptive"},
	AttrDTelFlowReportLatencyFactor:         {ObjectTypeDTel, "FlowReport.LatencyFactor"},
	AttrDTelFlowReportLatencyFloor:          {ObjectTypeDTel, "FlowReport.LatencyFloor"},
	AttrDTelHWID:                            {ObjectTypeDTel, "HWID"},
	AttrDTelTunnelAddress:                   {ObjectTypeDTel, "TunnelAddress"},
	AttrDTelTunnelAddress6:                  {ObjectTypeDTel, "TunnelAddress6"},
	AttrIntSessionMode:                      {ObjectTypeIntSession, "Mode"},
	AttrIntSessionMaxHopCount:               {ObjectTypeIntSession, "MaxHopCount"},
	AttrIntSessionInstructions:              {ObjectTypeIntSession, "Instructions"},
	AttrIntSessionDomainSpecificID:          {ObjectTypeIntSession, "DomainSpecificID"},
	AttrIntSessionDSInstruction:             {ObjectTypeIntSession, "DSInstruction"},
	AttrIntSessionDSFlags:                   {ObjectTypeIntSession, "DSFlags"},
	AttrIntSessionDiscard:                   {ObjectTypeIntSession, "Discard"},
	AttrIntSessionClampTCPMSS:               {ObjectTypeIntSession, "ClampTCPMSS"},
	AttrIntSessionEncapsulation:             {ObjectTypeIntSession, "Encapsulation"},
	AttrIntSessionTunnelDestination:         {ObjectTypeIntSession, "TunnelDestination"},
	AttrIntSessionTunnelDestination6:        {ObjectTypeIntSession, "TunnelDestination6"},
	AttrReportSessionSrcIP:                  {ObjectTypeReportSession, "SrcIP"},
	AttrReportSessionDestinations:           {ObjectTypeReportSession, "Destinations[]"},
	AttrReportSessionDestinationIP:          {ObjectTypeReportSession, "Destinations[].IP"},
	AttrReportSessionDestinationUDPPort:     {ObjectTypeReportSession, "Destinations[].UDPPort"},
	AttrReportSessionVirtualRouter:          {ObjectTypeReportSession, "VirtualRouter"},
	AttrReportSessionTruncateSize:           {ObjectTypeReportSession, "TruncateSize"},
	AttrReportSessionUDPDstPort:             {ObjectTypeReportSession, "UDPDstPort"},
	AttrReportSessionFormat:                 {ObjectTypeReportSession, "Format"},
	AttrReportSessionDSCP:                   {ObjectTypeReportSession, "DSCP"},
	AttrReportSessionCoalesceMaxReports:     {ObjectTypeReportSession, "Coalesce.MaxReports"},
	AttrReportSessionCoalesceMaxDelay:       {ObjectTypeReportSession, "Coalesce.MaxDelay"},
	AttrReportSessionRateLimit:              {ObjectTypeReportSession, "RateLimit"},
	AttrReportSessionDistributeByFlow:       {ObjectTypeReportSession, "DistributeByFlow"},
	AttrReportSessionMTU:                    {ObjectTypeReportSession, "MTU"},
	AttrReportSessionSrcPortMode:            {ObjectTypeReportSession, "SrcPort.Mode"},
	AttrReportSessionSrcPort:                {ObjectTypeReportSession, "SrcPort.Port"},
	AttrReportSessionSrcPortMin:             {ObjectTypeReportSession, "SrcPort.Min"},
	AttrReportSessionSrcPortMax:             {ObjectTypeReportSession, "SrcPort.Max"},
	AttrQueueReportPort:                     {ObjectTypeQueueReport, "Port"},
	AttrQueueReportQueue:                    {ObjectTypeQueueReport, "Queue"},
	AttrQueueReportDepthThreshold:           {ObjectTypeQueueReport, "DepthThreshold"},
	AttrQueueReportLatencyThreshold:         {ObjectTypeQueueReport, "LatencyThreshold"},
	AttrQueueReportResetThreshold:           {ObjectTypeQueueReport, "ResetThreshold"},
	AttrQueueReportBreachQuota:              {ObjectTypeQueueReport, "BreachQuota"},
	AttrQueueReportTailDrop:                 {ObjectTypeQueueReport, "TailDrop"},
	AttrQueueReportRateLimit:                {ObjectTypeQueueReport, "RateLimit"},
	AttrEventType:                           {ObjectTypeEvent, "Type"},
	AttrEventReportSession:                  {ObjectTypeEvent, "ReportSession"},
	AttrEventDSCP:                           {ObjectTypeEvent, "DSCP"},
	AttrWatchlistPriority:                   {ObjectTypeWatchlistEntry, "Priority"},
	AttrWatchlistMatchSrcPrefix:             {ObjectTypeWatchlistEntry, "Match.SrcPrefix"},
	AttrWatchlistMatchDstPrefix:             {ObjectTypeWatchlistEntry, "Match.DstPrefix"},
	AttrWatchlistMatchIPProtocol:            {ObjectTypeWatchlistEntry, "Match.IPProtocol"},
	AttrWatchlistMatchL4SrcPort:             {ObjectTypeWatchlistEntry, "Match.L4SrcPort"},
	AttrWatchlistMatchL4DstPort:             {ObjectTypeWatchlistEntry, "Match.L4DstPort"},
	AttrWatchlistMatchDSCPValue:             {ObjectTypeWatchlistEntry, "Match.DSCP.Value"},
	AttrWatchlistMatchDSCPMask:              {ObjectTypeWatchlistEntry, "Match.DSCP.Mask"},
	AttrWatchlistMatchTCPFlagsValue:         {ObjectTypeWatchlistEntry, "Match.TCPFlags.Value"},
	AttrWatchlistMatchTCPFlagsMask:          {ObjectTypeWatchlistEntry, "Match.TCPFlags.Mask"},
	AttrWatchlistMatchInPort:                {ObjectTypeWatchlistEntry, "Match.InPort"},
	AttrWatchlistMatchEtherType:             {ObjectTypeWatchlistEntry, "Match.EtherType"},
	AttrWatchlistMatchICMPType:              {ObjectTypeWatchlistEntry, "Match.ICMP.Type"},
	AttrWatchlistMatchICMPTypeMask:          {ObjectTypeWatchlistEntry, "Match.ICMP.TypeMask"},
	AttrWatchlistMatchICMPCode:              {ObjectTypeWatchlistEntry, "Match.ICMP.Code"},
	AttrWatchlistMatchICMPCodeMask:          {ObjectTypeWatchlistEntry, "Match.ICMP.CodeMask"},
	AttrWatchlistMatchInnerEnabled:          {ObjectTypeWatchlistEntry, "Match.Inner.Enabled"},
	AttrWatchlistMatchInnerTunnel:           {ObjectTypeWatchlistEntry, "Match.Inner.Tunnel"},
	AttrWatchlistMatchInnerTunnelID:         {ObjectTypeWatchlistEntry, "Match.Inner.TunnelID"},
	AttrWatchlistMatchInnerEtherType:        {ObjectTypeWatchlistEntry, "Match.Inner.EtherType"},
	AttrWatchlistMatchInnerSrcPrefix:        {ObjectTypeWatchlistEntry, "Match.Inner.SrcPrefix"},
	AttrWatchlistMatchInnerDstPrefix:        {ObjectTypeWatchlistEntry, "Match.Inner.DstPrefix"},
	AttrWatchlistMatchInnerIPProtocol:       {ObjectTypeWatchlistEntry, "Match.Inner.IPProtocol"},
	AttrWatchlistMatchInnerL4SrcPort:        {ObjectTypeWatchlistEntry, "Match.Inner.L4SrcPort"},
	AttrWatchlistMatchInnerL4DstPort:        {ObjectTypeWatchlistEntry, "Match.Inner.L4DstPort"},
	AttrWatchlistActionFlowOp:               {ObjectTypeWatchlistEntry, "Action.FlowOp"},
	AttrWatchlistActionIntSession:           {ObjectTypeWatchlistEntry, "Action.IntSession"},
	AttrWatchlistActionDropReportEnable:     {ObjectTypeWatchlistEntry, "Action.DropReportEnable"},
	AttrWatchlistActionTailDropReportEnable: {ObjectTypeWatchlistEntry, "Action.TailDropReportEnable"},
	AttrWatchlistActionFlowSamplePercent:    {ObjectTypeWatchlistEntry, "Action.FlowSamplePercent"},
	AttrWatchlistActionReportAllPackets:     {ObjectTypeWatchlistEntry, "Action.ReportAllPackets"},
	AttrWatchlistActionPacketInterval:       {ObjectTypeWatchlistEntry, "Action.PacketInterval"},
}

// AttrIDs lists every attribute id but AttrNone.
func AttrIDs() []AttrID {
	ids := make([]AttrID, 0, attrCount-1)
	for id := AttrNone + 1; id < attrCount; id++ {
		ids = append(ids, id)
	}
	return ids
}

// Object is the object type id belongs to (0 for AttrNone).
func (id AttrID) Object() ObjectType {
	if id >= attrCount {
		return 0
	}
	return attrInfo[id].object
}

// String is the attribute's Go field path, "[]" marking a list.
func (id AttrID) String() string {
	if id >= attrCount {
		return "AttrID(" + itoa(int(id)) + ")"
	}
	return attrInfo[id].field
}

// field renders id's field path for list entry i (i < 0: the attribute
// as a whole), e.g. "Destinations[2].UDPPort".
func (id AttrID) field(i int) string {
	s := id.String()
	if i < 0 {
		return strings.ReplaceAll(s, "[]", "")
	}
	return strings.Replace(s, "[]", "["+itoa(i)+"]", 1)
}
