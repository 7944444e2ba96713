package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
	swaggerfiles "github.com/swaggo/files"
	ginswagger "github.com/swaggo/gin-swagger"

	// The generated specification (make swagger) registers itself with swag.
	_ "ray-service/docs/swagger"
)

// swaggerRoutes serves the Swagger UI at swagger/index.html and the specification at swagger/doc.json.
// They document the API and hold no cluster data, so they need no token.
func (s *Server) swaggerRoutes(g *gin.RouterGroup) {
	g.GET("/swagger", func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, BasePath+"/swagger/index.html") })
	g.GET("/swagger/*any", ginswagger.WrapHandler(swaggerfiles.Handler))
}
