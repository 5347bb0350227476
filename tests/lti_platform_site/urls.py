"""lti_consumer's own URLs where the LMS mounts them (/api/), and the harness's control API."""
import host.views
from django.urls import include, path

urlpatterns = [
    path("api/", include("lti_consumer.plugin.urls")),
    path("harness/<str:action>", host.views.control),
]
