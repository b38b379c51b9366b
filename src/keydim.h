/*-------------------------------------------------------------------------
 *
 * keydim.h
 *	  Keys as an admission dimension (keydim.c): reached only through the
 *	  table (dimension.c), and the views' reads of a backend's key.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_KEYDIM_H
#define DBGATE_KEYDIM_H

#include "dimdefs.h"

extern DBGATE_HIDDEN const DbgateDimension dbgate_key_dimension;

#endif							/* DBGATE_KEYDIM_H */
