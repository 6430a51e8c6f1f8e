// Package ui is edl's web dashboard: static files embedded in the binary
// (no CDN, no build step) that the API serves at /ui/. The page talks to
// the same /v1 API as any client, with the token the user gives it once
// (kept in sessionStorage), so it sees what that token's tenant may see.
// Charts are hand-drawn SVG (static/chart.js): no chart library to fetch.
package ui
