/*-------------------------------------------------------------------------
 *
 * gucvar.h
 *	  A built-in integer setting tightened for a while (gucvar.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_GUCVAR_H
#define DBGATE_GUCVAR_H

struct config_generic;
struct guc_stack;

typedef struct DbgateGucOverride
{
	bool		applied;
	struct config_generic *rec; /* the GUC record */
	int		   *variable;		/* the variable behind it */
	int			value;			/* the value set */
	int			session;		/* the session's value before */
	Oid			session_srole;	/* and the role that set it */
	int			session_source; /* and its GucSource */
	bool		moved_source;	/* the record's source was moved from
								 * PGC_S_DEFAULT (for parallel workers) */
	struct guc_stack *stack;	/* top of its GUC stack then */
	int			stack_state;	/* that entry's state, or -1 */
} DbgateGucOverride;

extern void dbgate_guc_override_apply(DbgateGucOverride *o,
									  struct config_generic *rec,
									  int *variable, int value);
extern void dbgate_guc_override_apply_to_workers(DbgateGucOverride *o,
												 struct config_generic *rec,
												 int *variable, int value);
extern void dbgate_guc_override_restore(DbgateGucOverride *o);

#endif							/* DBGATE_GUCVAR_H */
