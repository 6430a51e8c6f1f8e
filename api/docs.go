package api

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"regexp"

	"github.com/edl-nomad/edl/openapi"
	"github.com/labstack/echo/v4"
)

// openapiJSON godoc
//
//	@Summary	This API's OpenAPI description, as JSON
//	@Tags		operations
//	@Produce	json
//	@Success	200	{object}	object
//	@Router		/openapi.json [get]
func (s *Server) openapiJSON(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openapi.JSON())
}

// openapiYAML godoc
//
//	@Summary	This API's OpenAPI description, as YAML
//	@Tags		operations
//	@Produce	application/yaml
//	@Success	200	{object}	object
//	@Router		/openapi.yaml [get]
func (s *Server) openapiYAML(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", openapi.YAML())
}

// docsRedirect godoc
//
//	@Summary	The browsable API documentation (redirects to /docs/index.html)
//	@Tags		operations
//	@Success	301
//	@Router		/docs [get]
func (s *Server) docsRedirect(c echo.Context) error {
	return c.Redirect(http.StatusMovedPermanently, "/docs/index.html")
}

// docsUI serves the Swagger UI under /docs/, with a Content-Security-Policy:
// its own files and the spec only, its one inline script allowed by hash,
// no framing.
func (s *Server) docsUI() echo.HandlerFunc {
	ui := openapi.UI("/openapi.json")
	csp := docsCSP(ui)
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		return ui(c)
	}
}

var (
	inlineScript = regexp.MustCompile(`(?s)<script>(.*?)</script>`)
	inlineStyle  = regexp.MustCompile(`(?s)<style>(.*?)</style>`)
	styleAttr    = regexp.MustCompile(`\sstyle="([^"]*)"`)
)

// docsCSP renders the UI's index page once and allows exactly its inline
// scripts, style elements and style attributes, by their SHA-256: nothing
// else inline runs or applies.
func docsCSP(ui echo.HandlerFunc) string {
	req := httptest.NewRequest(http.MethodGet, "/docs/index.html", nil)
	rec := httptest.NewRecorder()
	_ = ui(echo.New().NewContext(req, rec))
	page := rec.Body.Bytes()
	hashes := func(re *regexp.Regexp) string {
		out := ""
		for _, m := range re.FindAllSubmatch(page, -1) {
			sum := sha256.Sum256(m[1])
			out += " 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
		}
		return out
	}
	style := "style-src 'self'" + hashes(inlineStyle)
	if attrs := hashes(styleAttr); attrs != "" {
		style += " 'unsafe-hashes'" + attrs
	}
	return "default-src 'self'; script-src 'self'" + hashes(inlineScript) + "; " + style + "; img-src 'self' data:; " +
		"connect-src 'self'; font-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}
