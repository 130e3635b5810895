// Package mcprelay runs an attempt's MCP servers and relays them to its
// sandbox: each server is a stdio MCP server process, and the sandbox
// reaches it only through a Unix socket in a private folder that hemra
// creates for the attempt. Every JSON-RPC message is relayed unchanged
// (ids aside, see below) between the socket and the server's stdio, and
// every tools/call, resources/read and prompts/get is recorded in the
// attempt's event log, with its result, the server's name, the duration
// and the sizes.
//
// It owns one attempt's Session: the private folder (0700, with the
// sockets in its sock/ subfolder, which a container gets read-only), the
// servers it starts on the host (StartHost: their own process group, the
// environment the caller gives and nothing else, a private working
// directory, SIGKILL if hemra dies) or relays from inside the sandbox
// (Relay), the limits (1 MiB per message, 64 MiB of recorded calls), the
// stop (stdin closed, SIGTERM then SIGKILL to the group) and a record of
// what it started, so that `hemra doctor` finds what a killed hemra left
// running (Leftovers).
//
// One client at a time is relayed to a server, as MCP's stdio transport
// has one client per server process; a client that disconnects may be
// followed by another (request ids are rewritten per server so that a
// late answer never reaches the wrong client). A second concurrent client
// is answered with a JSON-RPC error.
//
// It does not own which servers an attempt has, where their variables
// come from, how the sandbox mounts the folder, nor what a failure means
// for the attempt: the executor decides those. It never sees a variable's
// name as anything but part of the environment it is handed.
package mcprelay
