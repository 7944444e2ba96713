package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
	swaggerfiles "github.com/swaggo/files"
	ginswagger "github.com/swaggo/gin-swagger"

	"ray-service/docs"
)

// swaggerRoutes serves the Swagger UI at swagger/index.html with the Swagger 2.0 document at
// swagger/doc.json, and the OpenAPI 3 document at openapi.json. They document the API and hold no
// cluster data, so they need no token.
func (s *Server) swaggerRoutes(g *gin.RouterGroup) {
	ui := ginswagger.WrapHandler(swaggerfiles.Handler)
	g.GET("/swagger", func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, BasePath+"/swagger/index.html") })
	g.GET("/swagger/*any", func(c *gin.Context) {
		if c.Param("any") == "/doc.json" {
			c.Data(http.StatusOK, "application/json; charset=utf-8", docs.Swagger2())
			return
		}
		ui(c)
	})
	g.GET("/openapi.json", s.openAPI)
}

// openAPI answers the OpenAPI 3 document: paste its address into any OpenAPI 3 tool.
//
//	@Summary		OpenAPI 3 document
//	@ID				getOpenAPIDocument
//	@Description	The API's OpenAPI 3.0 document, generated with the Swagger 2.0 one (swagger/doc.json) from the
//	@Description	same annotations; a request body that may be JSON, YAML or an uploaded file lists the three.
//	@Tags			service
//	@Produce		json
//	@Success		200	{object}	object
//	@Router			/rest/ray/v1/openapi.json [get]
func (s *Server) openAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/json; charset=utf-8", docs.OpenAPI3())
}
