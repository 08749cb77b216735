package rest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Egress rules. The adapter connects only to the host of base_url, and only
// when the address it actually dials is a public one: the check runs in the
// dialer's Control hook, after name resolution and just before connect, so
// a name that resolves to a public address when the catalog is checked and to
// 127.0.0.1 a moment later (DNS rebinding) is still refused. An operator who
// runs a job API on an internal network lists that network in the backend's
// allow_networks.

// ErrAddressDenied is wrapped by the error of a request the adapter refused
// to send because the backend's address is in a denied range (loopback,
// private, link-local, ...) that allow_networks does not list.
var ErrAddressDenied = errors.New("address not allowed")

// Resolver looks up a host's addresses when the adapter connects.
// *net.Resolver implements it; tests inject their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// deniedRange is a special-purpose address block the adapter does not
// connect to unless allow_networks lists it.
type deniedRange struct {
	prefix netip.Prefix
	what   string
}

// deniedRanges returns the blocks the adapter refuses by default: the IANA
// special-purpose blocks that are not globally reachable, and multicast.
// IPv4-mapped IPv6 addresses are checked as the IPv4 address they carry;
// NAT64 and 6to4 addresses are also checked by the IPv4 address they embed.
func deniedRanges() []deniedRange {
	table := []struct{ cidr, what string }{
		{"0.0.0.0/8", "unspecified or this-network"},
		{"10.0.0.0/8", "private"},
		{"100.64.0.0/10", "shared address space (CGNAT)"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"172.16.0.0/12", "private"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"192.0.2.0/24", "documentation"},
		{"192.88.99.0/24", "6to4 relay anycast"},
		{"192.168.0.0/16", "private"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved or broadcast"},
		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::/96", "IPv4-compatible (deprecated)"},
		{"64:ff9b:1::/48", "local-use NAT64"},
		{"100::/64", "discard-only"},
		{"2001::/23", "IETF protocol assignments (incl. Teredo)"},
		{"2001:db8::/32", "documentation"},
		{"3fff::/20", "documentation"},
		{"fc00::/7", "unique local (ULA)"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local (deprecated)"},
		{"ff00::/8", "multicast"},
	}
	out := make([]deniedRange, len(table))
	for i, r := range table {
		out[i] = deniedRange{prefix: netip.MustParsePrefix(r.cidr), what: r.what}
	}
	return out
}

// addressError is a refused address; it wraps ErrAddressDenied.
type addressError struct {
	addr netip.Addr
	what string
}

func (e *addressError) Error() string {
	return fmt.Sprintf("connecting to %s (%s) is not allowed; list its network in allow_networks to permit it", e.addr, e.what)
}

func (e *addressError) Unwrap() error { return ErrAddressDenied }

// egress decides which addresses the adapter may connect to, and dials.
type egress struct {
	allow    []netip.Prefix
	deny     []deniedRange
	resolver Resolver
	dialer   net.Dialer
	// nat64 and sixToFour are the IPv6 blocks that embed an IPv4 address.
	nat64, sixToFour netip.Prefix
}

func newEgress(allow []netip.Prefix, resolver Resolver) *egress {
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	e := &egress{
		allow:     allow,
		deny:      deniedRanges(),
		resolver:  resolver,
		nat64:     netip.MustParsePrefix("64:ff9b::/96"),
		sixToFour: netip.MustParsePrefix("2002::/16"),
	}
	e.dialer = net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		Control:   e.control,
	}
	return e
}

// check returns nil when the adapter may connect to ip, else an error
// wrapping ErrAddressDenied.
func (e *egress) check(ip netip.Addr) error {
	ip = ip.WithZone("").Unmap()
	if !ip.IsValid() {
		return &addressError{addr: ip, what: "invalid"}
	}
	if e.allowed(ip) {
		return nil
	}
	if what := e.denied(ip); what != "" {
		return &addressError{addr: ip, what: what}
	}
	if v4, ok := e.embeddedIPv4(ip); ok && !e.allowed(v4) {
		if what := e.denied(v4); what != "" {
			return &addressError{addr: ip, what: "embeds " + v4.String() + ", " + what}
		}
	}
	return nil
}

func (e *egress) allowed(ip netip.Addr) bool {
	for _, p := range e.allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (e *egress) denied(ip netip.Addr) string {
	for _, r := range e.deny {
		if r.prefix.Contains(ip) {
			return r.what
		}
	}
	return ""
}

// embeddedIPv4 returns the IPv4 address a NAT64 (64:ff9b::/96) or 6to4
// (2002::/16) address stands for.
func (e *egress) embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	switch {
	case e.nat64.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case e.sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// control runs after resolution and before connect, with the address
// actually dialled: the last word on where a connection goes.
func (e *egress) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected dial address %q: %w", address, ErrAddressDenied)
	}
	return e.check(ap.Addr())
}

// dialContext resolves the host itself (through the injectable resolver),
// refuses denied addresses before trying them, and dials the others one by
// one; the dialer's Control hook checks each address again at connect time.
func (e *egress) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("bad port %q", portText)}
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		if numericHost(host) {
			return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("host %q is an IP address in a non-standard form: %w", host, ErrAddressDenied)}
		}
		addrs, err = e.resolver.LookupNetIP(ctx, ipNetwork(network), host)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		if len(addrs) == 0 {
			return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}}
		}
	}
	var first error
	for _, ip := range addrs {
		target := netip.AddrPortFrom(ip, uint16(port))
		if err := e.check(ip); err != nil {
			if first == nil {
				first = &net.OpError{Op: "dial", Net: network, Addr: net.TCPAddrFromAddrPort(target), Err: err}
			}
			continue
		}
		c, err := e.dialer.DialContext(ctx, network, target.String())
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

func ipNetwork(network string) string {
	switch network {
	case "tcp4":
		return "ip4"
	case "tcp6":
		return "ip6"
	}
	return "ip"
}

// numericHost reports a host that URL parsers in browsers and C resolvers
// read as an IPv4 address although it is not a dotted quad: its last label
// is a decimal, octal or hexadecimal number ("127.1", "2130706433",
// "0x7f000001", "0177.0.0.1"). Such a host is refused rather than resolved.
func numericHost(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if h, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		last = h
		for _, c := range last {
			if !strings.ContainsRune("0123456789abcdef", c) {
				return false
			}
		}
		return true
	}
	for _, c := range last {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseNetworks parses allow_networks; Validate has checked them.
func parseNetworks(cidrs []string) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// checkNetwork checks one allow_networks entry.
func checkNetwork(cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	switch {
	case err != nil:
		if ip, ipErr := netip.ParseAddr(cidr); ipErr == nil && ip.Zone() == "" {
			return fmt.Errorf("%q is an address, not a network; write %s/%d", cidr, cidr, ip.BitLen())
		}
		return fmt.Errorf("%q is not a network in CIDR notation (for example 10.0.0.0/8)", cidr)
	case p.Addr().Is4In6():
		return fmt.Errorf("%q: write IPv4-mapped networks as IPv4", cidr)
	case p != p.Masked():
		return fmt.Errorf("%q has host bits set; write %s", cidr, p.Masked())
	}
	return nil
}
