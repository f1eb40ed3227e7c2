/*
 * assets.h - files the API serves as they are, embedded at build time
 * (cmake/embed_files.cmake): each is NUL-terminated, _len without the NUL.
 */
#ifndef PT_ASSETS_H
#define PT_ASSETS_H
#include <stddef.h>

/* GET /v1/openapi.json: the OpenAPI 3.1 description (firmware/openapi.json). */
extern const char pt_asset_openapi_json[];
extern const size_t pt_asset_openapi_json_len;

/* GET /: the operator page (firmware/operator.html, CSS and JS inline). */
extern const char pt_asset_operator_html[];
extern const size_t pt_asset_operator_html_len;

#endif
