# lf_embed_assets(OUT ASSET...): generates OUT, a C++ file defining lf::ui::find_page_asset() and
# page_assets_size() (include/lf/ui/page_assets.h) over the ASSET files' bytes, so the live page
# ships inside lf-train (clusters are offline: no CDN, no install folder). index.html is served
# at "/", every other file at "/<name>". Regenerated when an asset changes.
function(lf_embed_assets out)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} "-DASSETS=${ARGN}" -P ${PROJECT_SOURCE_DIR}/cmake/lf_embed_assets_script.cmake
    DEPENDS ${ARGN} ${PROJECT_SOURCE_DIR}/cmake/lf_embed_assets_script.cmake
    COMMENT "Embedding the live page's assets"
    VERBATIM)
endfunction()
