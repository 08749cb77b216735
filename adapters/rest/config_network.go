package rest

import (
	"net/netip"
	"net/url"
	"strings"

	"github.com/jobbridge/jobbridge/adapters"
)

// CheckAddress reports, as an [adapters.FieldError] at base_url, a base_url
// the adapter would refuse to connect to whatever the name service says: an
// IP address in a range refused by default (loopback, private, link-local,
// CGNAT, ...) or the name localhost, when no allow_networks entry contains
// it. It says which network to add to allow_networks. Other names are not
// resolved: where they lead is checked at every connect.
//
// It is separate from [BackendConfig.Validate] so that a catalog validator
// can report the mistake before the server starts, while [New] keeps
// checking the address it is given.
func (c *BackendConfig) CheckAddress() error {
	if checkBaseURL(c.BaseURL) != nil {
		return nil // Validate reports it
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil {
		return nil
	}
	var allow []netip.Prefix
	for _, n := range c.AllowNetworks {
		if checkNetwork(n) != nil {
			return nil // Validate reports it; the intended network is unclear
		}
		allow = append(allow, netip.MustParsePrefix(n))
	}
	host := u.Hostname()
	e := newEgress(allow, nil)
	if isLocalhost(host) {
		// localhost resolves to the loopback addresses; one allowed is enough.
		if e.check(netip.MustParseAddr("127.0.0.1")) == nil || e.check(netip.IPv6Loopback()) == nil {
			return nil
		}
		return adapters.Fieldf("base_url", "host %s is this machine's loopback interface (127.0.0.0/8, ::1), which the adapter refuses by default; add 127.0.0.0/8 to allow_networks to permit it", host)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || e.check(ip) == nil {
		return nil
	}
	ip = ip.WithZone("").Unmap()
	r, ok := configRefusedRange(e.deny, ip)
	if !ok {
		if v4, embeds := e.embeddedIPv4(ip); embeds {
			if r4, ok := configRefusedRange(e.deny, v4); ok {
				return adapters.Fieldf("base_url", "host %s embeds %s, which is in %s, %s range, refused by default; add %s to allow_networks to permit it", host, v4, r4.prefix, article(r4.what), r4.prefix)
			}
		}
		return adapters.Fieldf("base_url", "host %s is refused by default; list its network in allow_networks to permit it", host)
	}
	return adapters.Fieldf("base_url", "host %s is in %s, %s range, which the adapter refuses by default; add %s to allow_networks to permit it", host, r.prefix, article(r.what), r.prefix)
}

// article puts "a" or "an" before a range's description.
func article(what string) string {
	if what != "" && strings.ContainsRune("aeiouAEIOU", rune(what[0])) && !strings.HasPrefix(what, "uni") {
		return "an " + what
	}
	return "a " + what
}

// configRefusedRange returns the block of deny that contains ip.
func configRefusedRange(deny []deniedRange, ip netip.Addr) (deniedRange, bool) {
	for _, r := range deny {
		if r.prefix.Contains(ip) {
			return r, true
		}
	}
	return deniedRange{}, false
}

// isLocalhost reports the names that always mean this machine: localhost
// and its subdomains (RFC 6761), with or without the final dot.
func isLocalhost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}
