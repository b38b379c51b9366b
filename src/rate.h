/*-------------------------------------------------------------------------
 *
 * rate.h
 *	  A budget's token bucket: max_rate and rate_burst (rate.c), an
 *	  admission dimension reached only through the table (dimension.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_RATE_H
#define DBGATE_RATE_H

#include "dimdefs.h"

extern DBGATE_HIDDEN const DbgateDimension dbgate_rate_dimension;

#endif							/* DBGATE_RATE_H */
