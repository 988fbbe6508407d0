// Package collector serves intcollector's state over gNMI: it renders the
// collector's flow table, sources and counters (dataplane/collector) as the
// intd-collector YANG model (gen/collector), a read-only target of the
// server package.
package collector
