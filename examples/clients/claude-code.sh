# Claude Code: add jobbridge to the current project (-s user: for every project).

# stdio: Claude Code starts the server itself.
claude mcp add jobbridge -- jobbridge serve --stdio --config /ABSOLUTE/PATH/TO/catalog.yaml

# HTTP: a server already running (jobbridge serve, or jobbridge demo).
claude mcp add --transport http jobbridge-http http://127.0.0.1:8080/mcp

# HTTP with authentication: the bearer token from your identity provider.
claude mcp add --transport http jobbridge-secured https://jobbridge.example.com/mcp --header "Authorization: Bearer ${JOBBRIDGE_TOKEN}"
