// Package clients holds configuration snippets for MCP clients (Claude
// Desktop, Claude Code, VS Code, Cursor), over stdio and HTTP; its test
// parses each one and starts the server it names. README.md explains them.
package clients
