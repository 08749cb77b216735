package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// wellKnownPath is where RFC 9728 protected resource metadata lives.
const wellKnownPath = "/.well-known/oauth-protected-resource"

// Middleware authenticates every request before next sees it and puts the
// [Principal] in the request's context ([PrincipalFrom]). A request without
// credentials, or with an invalid one, is answered 401 with a
// WWW-Authenticate challenge naming the protected resource metadata and the
// supported scopes; a malformed one (a token in the query string, two
// Authorization headers) 400. Mount [Authenticator.MetadataHandler] outside
// it.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			a.refuse(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

func (a *Authenticator) refuse(w http.ResponseWriter, r *http.Request, err error) {
	a.log.DebugContext(r.Context(), "request not authenticated", "reason", err.Error(), "remote", r.RemoteAddr)
	var (
		status      = http.StatusUnauthorized
		code        string
		description string
	)
	switch {
	case errors.Is(err, ErrMalformedRequest):
		status, code, description = http.StatusBadRequest, "invalid_request", err.Error()
	case errors.Is(err, ErrInvalidToken):
		code, description = "invalid_token", "the access token is not valid for this server"
	default:
		description = "this server needs a bearer token"
	}
	var params []param
	if code != "" {
		params = append(params, param{"error", code})
	}
	params = append(params, a.resourceParams()...)
	w.Header().Set("WWW-Authenticate", challenge(params))
	writeError(w, status, code, description)
}

// resourceParams are the challenge's resource_metadata and scope.
func (a *Authenticator) resourceParams() []param {
	var params []param
	if a.metadataURL != "" {
		params = append(params, param{"resource_metadata", a.metadataURL})
	}
	if len(a.scopes) > 0 {
		params = append(params, param{"scope", strings.Join(a.scopes, " ")})
	}
	return params
}

// Forbidden answers 403 insufficient_scope (RFC 6750 §3.1, MCP
// authorization): the caller is authenticated but lacks scopes. scopes are
// all the scopes the operation needs, so that the client can ask for them
// in one go.
func (a *Authenticator) Forbidden(w http.ResponseWriter, scopes []string) {
	need := strings.Join(dedupe(scopes), " ")
	params := []param{{"error", "insufficient_scope"}}
	if need != "" {
		params = append(params, param{"scope", need})
	}
	if a.metadataURL != "" {
		params = append(params, param{"resource_metadata", a.metadataURL})
	}
	description := "this operation needs more scopes"
	if need != "" {
		description = "this operation needs scope " + need
	}
	params = append(params, param{"error_description", description})
	w.Header().Set("WWW-Authenticate", challenge(params))
	writeError(w, http.StatusForbidden, "insufficient_scope", description)
}

// MetadataURL is the URL of this server's protected resource metadata, as
// named in challenges: "<resource origin>/.well-known/oauth-protected-resource".
// It is empty without OAuth.
func (a *Authenticator) MetadataURL() string { return a.metadataURL }

// MetadataPaths are the paths at which to mount [Authenticator.MetadataHandler]:
// the root form named in challenges and, when the resource has a path (e.g.
// /mcp), the RFC 9728 path-inserted form
// (/.well-known/oauth-protected-resource/mcp) that clients try without a
// challenge. Empty without OAuth.
func (a *Authenticator) MetadataPaths() []string {
	if a.metadataURL == "" {
		return nil
	}
	paths := []string{wellKnownPath}
	if u, err := url.Parse(a.resource); err == nil {
		if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
			paths = append(paths, wellKnownPath+p)
		}
	}
	return paths
}

// MetadataHandler serves the RFC 9728 protected resource metadata:
// resource, authorization_servers, scopes_supported and
// bearer_methods_supported ["header"]. Without OAuth there is no
// authorization server to name, and it answers 404.
func (a *Authenticator) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.metadata == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", "*")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodOptions:
			w.Header().Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Write(a.metadata)
	})
}

func protectedResourceMetadata(cfg Config) []byte {
	doc := struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
	}{
		Resource:               cfg.Resource,
		AuthorizationServers:   cfg.OAuth.AuthorizationServers,
		ScopesSupported:        cfg.ScopesSupported,
		BearerMethodsSupported: []string{"header"},
	}
	b, _ := json.Marshal(doc) // strings only
	return b
}

type param struct{ name, value string }

// challenge renders a Bearer challenge with quoted-string parameters.
func challenge(params []param) string {
	var b strings.Builder
	b.WriteString("Bearer")
	for i, p := range params {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(" " + p.name + `="`)
		for _, c := range p.value {
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteRune(c)
			case c < 0x20 || c == 0x7f:
			default:
				b.WriteRune(c)
			}
		}
		b.WriteByte('"')
	}
	return b.String()
}

func writeError(w http.ResponseWriter, status int, code, description string) {
	body := struct {
		Error       string `json:"error,omitempty"`
		Description string `json:"error_description"`
	}{code, description}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}
