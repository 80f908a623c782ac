# kcr_generate_types - typed C objects from CustomResourceDefinitions and of
# built-in kinds, made at build time by kcr-gen and compiled into a target
# (docs/typed-objects.md).
#
#   kcr_generate_types(TARGET <target> CRDS <crd.yaml>...
#                      [VERSIONS <v>...] [PATHS <path>...] [OUTPUT_DIR <dir>])
#   kcr_generate_types(TARGET <target> KINDS <apiVersion/Kind>...
#                      [NAME <base>] [OUTPUT_DIR <dir>])
#
# For each CRD file, <base>.h and <base>.c in OUTPUT_DIR (default
# ${CMAKE_CURRENT_BINARY_DIR}/kcr-gen/<target>), <base> being the file's name
# without extension and, for controller-gen's <group>_<plural>.yaml, the
# plural: config/crd/bases/ebdman.example.com_ebds.yaml gives ebds.h. The
# sources are added to <target> and OUTPUT_DIR to its include directories
# (PUBLIC), so `#include "ebds.h"` works in the target and in what links it.
# They are made again whenever a CRD file or kcr-gen changes. VERSIONS: only
# these served versions (default: every served version). PATHS: only the
# members on these paths (JSON Pointers from the object's root:
# /spec/vfmTemplate/image, /status/conditions), in every kind of the call;
# each kind's <prefix>_keep is then that list, for kcr_informer_opts.keep
# (docs/typed-objects.md, "Only the paths you use").
#
# KINDS: built-in kinds (v1/ConfigMap, apps/v1/Deployment,
# coordination.k8s.io/v1/Lease ...) from the OpenAPI snapshot in
# KCR_OPENAPI_DIR (set by find_package(kcr) and by libkcr's own build), all
# into one pair <base>.h / <base>.c (NAME, default k8s): the kinds share
# their types (PodSpec ...), so name every built-in kind a target uses in
# one call.
#
# In libkcr's own build kcr-gen is the target of that name; after
# find_package(kcr) it is kcr::kcr-gen.
# kcr_generate_types_base(<crd file> <var>): the base name kcr-gen gives the
# files it makes from <crd file> (see above), in <var>.
function(kcr_generate_types_base crd var)
  get_filename_component(base ${crd} NAME)
  string(REGEX REPLACE "\\.(yaml|yml)$" "" base "${base}")
  if(base MATCHES "_([^_]+)$")
    set(base "${CMAKE_MATCH_1}")
  endif()
  string(TOLOWER "${base}" base)
  string(REGEX REPLACE "[^a-z0-9]" "_" base "${base}")
  set(${var} ${base} PARENT_SCOPE)
endfunction()

function(kcr_generate_types)
  cmake_parse_arguments(G "" "TARGET;OUTPUT_DIR;NAME" "CRDS;VERSIONS;PATHS;KINDS" ${ARGN})
  if(NOT G_TARGET OR (NOT G_CRDS AND NOT G_KINDS) OR (G_CRDS AND G_KINDS))
    message(FATAL_ERROR "kcr_generate_types: TARGET and one of CRDS or KINDS are required")
  endif()
  if(G_KINDS AND (G_VERSIONS OR NOT KCR_OPENAPI_DIR))
    message(FATAL_ERROR "kcr_generate_types: KINDS takes no VERSIONS (a kind names its "
                        "version) and needs KCR_OPENAPI_DIR (find_package(kcr) sets it)")
  endif()
  if(G_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "kcr_generate_types: unknown arguments: ${G_UNPARSED_ARGUMENTS}")
  endif()
  if(G_PATHS AND G_KINDS)
    message(FATAL_ERROR "kcr_generate_types: PATHS is for CRDS (the built-in kinds are "
                        "generated whole)")
  endif()
  if(TARGET kcr-gen)
    set(gen kcr-gen)
  elseif(TARGET kcr::kcr-gen)
    set(gen kcr::kcr-gen)
  else()
    message(FATAL_ERROR "kcr_generate_types: no kcr-gen (find_package(kcr) first)")
  endif()
  if(NOT G_OUTPUT_DIR)
    set(G_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/kcr-gen/${G_TARGET})
  endif()
  file(MAKE_DIRECTORY ${G_OUTPUT_DIR})
  set(vers "")
  foreach(v IN LISTS G_VERSIONS)
    list(APPEND vers --version ${v})
  endforeach()
  foreach(p IN LISTS G_PATHS)
    list(APPEND vers --path ${p})
  endforeach()
  if(G_KINDS)
    if(NOT G_NAME)
      set(G_NAME k8s)
    endif()
    file(GLOB docs ${KCR_OPENAPI_DIR}/*.json)
    set(args "")
    foreach(doc IN LISTS docs)
      list(APPEND args --openapi ${doc})
    endforeach()
    foreach(kind IN LISTS G_KINDS)
      list(APPEND args --kind ${kind})
    endforeach()
    set(h ${G_OUTPUT_DIR}/${G_NAME}.h)
    set(c ${G_OUTPUT_DIR}/${G_NAME}.c)
    add_custom_command(OUTPUT ${h} ${c}
      COMMAND ${gen} -o ${G_OUTPUT_DIR} --name ${G_NAME} ${args}
      DEPENDS ${docs} ${gen}
      COMMENT "kcr-gen: ${G_KINDS}"
      VERBATIM)
    target_sources(${G_TARGET} PRIVATE ${c} ${h})
  endif()
  foreach(crd IN LISTS G_CRDS)
    get_filename_component(abs ${crd} ABSOLUTE)
    kcr_generate_types_base(${crd} base)
    set(h ${G_OUTPUT_DIR}/${base}.h)
    set(c ${G_OUTPUT_DIR}/${base}.c)
    add_custom_command(OUTPUT ${h} ${c}
      COMMAND ${gen} -o ${G_OUTPUT_DIR} ${vers} ${abs}
      DEPENDS ${abs} ${gen}
      COMMENT "kcr-gen: typed objects from ${crd}"
      VERBATIM)
    target_sources(${G_TARGET} PRIVATE ${c} ${h})
  endforeach()
  target_include_directories(${G_TARGET} PUBLIC $<BUILD_INTERFACE:${G_OUTPUT_DIR}>)
endfunction()
